#!/usr/bin/env node
// node-extension: an extension written in JavaScript on the extension-runtime package
// (bindings/node; built by scripts/build-node-runtime.sh, see README.md and docs/node.md).
//
// Each request channel takes line commands:
//   ping         -> "pong <pid>"
//   save <text>  -> saves <text> to notes.txt in the extension's container under a task
//                   assertion, atomically (temporary file, fsync, rename; abandoned when
//                   expired): "saved" or "not saved"
//   hold         -> holds an assertion with expiringActivity until it is about to expire:
//                   "holding", then "expired" (or "denied" at once when none was granted)
//   done <text>  -> completes the request, returning <text> to the host
//
// The package is found as node_modules/extension-runtime next to this file, or on NODE_PATH.
'use strict';
const fs = require('fs/promises');
const path = require('path');
const rt = require('extension-runtime');

const notes = path.join(rt.containerPath() || '/tmp', 'notes.txt');

/** Writes `text` under an assertion; resolves whether it was saved. */
function save(text) {
  return new Promise((resolve) => {
    const abandon = new AbortController();
    rt.performExpiringActivity('save notes', async (expired) => {
      if (expired) {
        abandon.abort(); // the second call (or the only one, when denied): stop quickly
        resolve(false);
        return;
      }
      // The first call: the assertion is held until this promise settles.
      const temporary = `${notes}.tmp`;
      try {
        const file = await fs.open(temporary, 'w', 0o600);
        try {
          await file.writeFile(`${text}\n`, { signal: abandon.signal });
          await file.sync();
        } finally {
          await file.close();
        }
        if (abandon.signal.aborted) return resolve(false);
        await fs.rename(temporary, notes);
        resolve(true);
      } catch {
        resolve(false);
      }
    });
  });
}

/** Holds an assertion until it is about to expire. */
async function hold(reply) {
  await rt.expiringActivity('hold', async (activity) => {
    if (!activity.granted) return reply('denied');
    reply('holding');
    await new Promise((resolve) => activity.signal.addEventListener('abort', resolve, { once: true }));
    reply('expired');
  });
}

function serve(request) {
  const channel = request.channel;
  const reply = (line) => {
    if (channel.writable) channel.write(`${line}\n`);
  };
  let pending = 0; // commands still answering: the channel is ended after them
  let ended = false;
  const track = (promise) => {
    pending += 1;
    promise.finally(() => {
      pending -= 1;
      if (ended && pending === 0) channel.end();
    });
  };
  let buffered = '';
  channel.setEncoding('utf8');
  channel.on('data', (text) => {
    buffered += text;
    for (let i; (i = buffered.indexOf('\n')) >= 0; buffered = buffered.slice(i + 1)) {
      const line = buffered.slice(0, i).trim();
      const [command, ...rest] = line.split(' ');
      if (command === 'ping') reply(`pong ${process.pid}`);
      else if (command === 'save') track(save(rest.join(' ')).then((saved) => reply(saved ? 'saved' : 'not saved')));
      else if (command === 'hold') track(hold(reply));
      else if (command === 'done') request.complete(rest.join(' '));
      else if (command) reply(`unknown command: ${command}`);
    }
  });
  channel.on('end', () => {
    ended = true;
    if (pending === 0) channel.end();
  });
}

// As the first process of its pid namespace (the sandbox's), Node's own SIGTERM handling would
// be ignored by the kernel: handle it, so that a stop ends the process at once.
process.on('SIGTERM', () => process.exit(0));

try {
  rt.start({ onRequest: serve });
} catch (error) {
  if (!(error instanceof rt.NotSupervisedError)) throw error;
  console.error('node-extension: not launched by extensiond');
  process.exit(1);
}
