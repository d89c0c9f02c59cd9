// widget.js: a Node.js extension on the extension-runtime package (bindings/node, built by
// scripts/build-node-runtime.sh), run directly by extensiond: no bridge. The package is found
// as node_modules/extension-runtime beside this file (NodeRuntimeTests lays it out so), or
// through NODE_PATH. Each request channel takes line commands, one answer line each (the
// protocol of Tests/Fixtures/test-extension for the same checks):
//   ping                -> "pong PID" (the pid in the extension's own pid namespace)
//   assert SECS REASON  -> performExpiringActivity(REASON): "granted", or "denied" when the
//                          block is called with true only; when the expired call arrives while
//                          the work runs, "expired"; the work holds the assertion for SECS
//                          seconds or until expiry, then answers "released"
//   complete TEXT       -> request.complete(TEXT) (the rest of the line)
//   cancel REASON       -> request.cancel(REASON)
//   observe NAME        -> "observing", then "notified NAME" for each post
//   container           -> "container PATH" or "no container"
//   refreshes           -> "refreshes N": background refreshes handled (answered new-data)
// At the host's end of input the channel is ended once no assertion of it is running.
'use strict';
const rt = require('extension-runtime');

let refreshes = 0;
rt.onRefresh((id) => {
  refreshes += 1;
  rt.refreshComplete(id, rt.RefreshResult.NEW_DATA);
});

function serve(request) {
  const channel = request.channel;
  const reply = (line) => {
    if (!channel.destroyed && channel.writable) channel.write(line + '\n');
  };
  let running = 0; // assertions whose work runs
  let ended = false;
  const endIfIdle = () => {
    if (ended && running === 0) channel.end();
  };

  function assertion(seconds, reason) {
    let expire = null; // resolves the wait early: the expired call
    let started = false;
    rt.performExpiringActivity(reason, (expired) => {
      if (expired) {
        reply(started ? 'expired' : 'denied');
        if (expire) expire();
        return undefined;
      }
      started = true;
      running += 1;
      reply('granted');
      // The assertion is held until this promise settles.
      return new Promise((resolve) => {
        const timer = setTimeout(resolve, seconds * 1000);
        expire = () => {
          clearTimeout(timer);
          resolve();
        };
      }).then(() => {
        reply('released');
        running -= 1;
        endIfIdle();
      });
    });
  }

  let buffered = '';
  channel.setEncoding('utf8');
  channel.on('data', (text) => {
    buffered += text;
    let newline;
    while ((newline = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, newline).trim();
      buffered = buffered.slice(newline + 1);
      const words = line.split(/\s+/);
      const rest = words.slice(1).join(' ');
      try {
        switch (words[0]) {
          case 'ping':
            reply(`pong ${process.pid}`);
            break;
          case 'assert':
            assertion(Number(words[1] || '1'), words.slice(2).join(' ') || 'node work');
            break;
          case 'complete':
            request.complete(rest);
            break;
          case 'cancel':
            request.cancel(rest);
            break;
          case 'observe':
            rt.observe(words[1] || '', (name) => reply(`notified ${name}`));
            reply('observing');
            break;
          case 'container':
            reply(rt.containerPath() ? `container ${rt.containerPath()}` : 'no container');
            break;
          case 'refreshes':
            reply(`refreshes ${refreshes}`);
            break;
          case '':
            break;
          default:
            reply(`unknown command: ${words[0]}`);
        }
      } catch (error) {
        reply(`refused: ${error.name}: ${error.message}`);
      }
    }
  });
  channel.on('end', () => {
    ended = true;
    endIfIdle();
  });
}

// As pid 1 of its pid namespace, Node's own SIGTERM handling is ignored (docs/node.md,
// "Signals"): handle it, so that a stop (the daemon's shutdown at the end of each test) is quick.
process.on('SIGTERM', () => process.exit(0));

try {
  rt.start({ onRequest: serve });
} catch (error) {
  if (!(error instanceof rt.NotSupervisedError)) throw error;
  process.stderr.write('node widget: not launched by extensiond\n');
  process.exit(1);
}
