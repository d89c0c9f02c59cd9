// node-extension: a Node.js extension (through Tests/Fixtures/runtime-bridge) that
// instantiates WebAssembly at start. Line commands, one answer line each:
//   ping          "pong PID wasm SUM" (SUM: 2 + 3 computed by the WebAssembly module)
//   allocate MIB  allocates and fills MIB MiB in 1 MiB buffers: "allocated MIB MiB", or
//                 "out of memory after N MiB: MESSAGE" when an allocation fails
'use strict';
const readline = require('readline');

// (module (func (export "add") (param i32 i32) (result i32) local.get 0 local.get 1 i32.add))
const wasm = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 7, 1, 96, 2, 127, 127, 1, 127, 3, 2, 1, 0, 7, 7, 1, 3, 97, 100, 100, 0, 0,
  10, 9, 1, 7, 0, 32, 0, 32, 1, 106, 11,
]);
const memory = new WebAssembly.Memory({ initial: 1 });
const { add } = new WebAssembly.Instance(new WebAssembly.Module(wasm)).exports;
const held = [];

function answer(line) {
  const words = line.trim().split(/\s+/);
  switch (words[0]) {
    case 'ping':
      return `pong ${process.pid} wasm ${add(2, 3)} memory ${memory.buffer.byteLength}`;
    case 'allocate': {
      const mib = Number(words[1]);
      let done = 0;
      try {
        for (; done < mib; done++) held.push(Buffer.alloc(1 << 20, 1));
      } catch (e) {
        held.length = 0;
        return `out of memory after ${done} MiB: ${e.message}`;
      }
      return `allocated ${done} MiB`;
    }
    default:
      return `unknown command: ${words[0]}`;
  }
}

const lines = readline.createInterface({ input: process.stdin });
lines.on('line', (line) => process.stdout.write(answer(line) + '\n'));
lines.on('close', () => process.exit(0));
process.stdout.write('ready\n');
