// jsonl-worker.js - a fanhub worker in JavaScript (Node.js), written from
// docs/worker-protocol.md alone: appends every message to
// options.config.path as one JSON line (seq, attempt, pid, topic, body).
//   plugin: worker
//   options: {command: [node, .../jsonl-worker.js], config: {path: /var/log/fanhub/bus.jsonl}}
// V8 compiles JavaScript to machine code at run time, so it needs memory
// that is writable and then executable: under the units'
// MemoryDenyWriteExecute=yes it aborts at start unless node runs with
// --jitless (config/systemd/jit-workers.conf, tests/integration/plugins/test_worker_jit.py).
'use strict';
const fs = require('fs');
const net = require('net');

const sock = new net.Socket({ fd: Number(process.env.FANHUB_WORKER_FD || 3), readable: true, writable: true });
let buf = Buffer.alloc(0);
let out = null;

function frame(type, payload) {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(1 + payload.length, 0);
  head.write(type, 4, 'latin1');
  return Buffer.concat([head, payload]);
}

// The next whole frame of buf as [type, payload], or null.
function take() {
  if (buf.length < 4) return null;
  const len = buf.readUInt32BE(0);
  if (len === 0) throw new Error('protocol error: a frame of length 0');
  if (buf.length < 4 + len) return null;
  const type = String.fromCharCode(buf[4]);
  const payload = buf.subarray(5, 4 + len);
  buf = buf.subarray(4 + len);
  return [type, payload];
}

function hello(payload) {
  const config = (JSON.parse(payload.toString('utf8')).options || {}).config || {};
  try {
    out = fs.openSync(config.path, 'a');
  } catch (e) {
    sock.write(frame('E', Buffer.from(JSON.stringify({ error: 'config.path: ' + e.message }))));
    sock.end();
    return;
  }
  sock.write(frame('R', Buffer.from(JSON.stringify({ protocol: 1, name: 'jsonl-worker.js', version: '1.0' }))));
}

// A MESSAGE: its line written, its OK answer.
function message(p) {
  const ticket = p.subarray(0, 8);
  const seq = p.readBigUInt64BE(8);
  const attempt = p.readUInt32BE(16);
  let at = 30 + p.readUInt16BE(28);
  const count = p.readUInt32BE(at);
  at += 4;
  const frames = [];
  for (let i = 0; i < count; i++) {
    const len = p.readUInt32BE(at);
    frames.push(p.subarray(at + 4, at + 4 + len));
    at += 4 + len;
  }
  const line = { seq: Number(seq), attempt, pid: process.pid, topic: frames[0].toString('utf8'),
                 body: frames[1].toString('utf8') };
  fs.writeSync(out, JSON.stringify(line) + '\n');
  const answer = Buffer.alloc(11);
  ticket.copy(answer, 0);
  answer.writeUInt8(0, 8);      // OK
  answer.writeUInt16BE(0, 9);   // no reason
  return frame('A', answer);
}

sock.on('data', (chunk) => {
  buf = Buffer.concat([buf, chunk]);
  const answers = [];
  for (let f = take(); f; f = take()) {
    if (f[0] === 'H') hello(f[1]);
    else if (f[0] === 'M') answers.push(message(f[1]));
    else if (f[0] === 'Q') {
      sock.end(Buffer.concat(answers), () => process.exit(0)); // answered: done
      return;
    } else throw new Error("protocol error: frame type '" + f[0] + "'");
  }
  if (answers.length) sock.write(Buffer.concat(answers)); // one write for all read
});
sock.on('end', () => process.exit(0));
