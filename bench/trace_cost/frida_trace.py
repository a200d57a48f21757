#!/usr/bin/env python3
"""bench/trace_cost/frida_trace.py PROG ARGS...: Frida's Interceptor as the peer of `kerf trace
'f {a=arg0, b=arg1}'`: spawns PROG, records (time, a, b) at every entry of f in a JavaScript
array sent in batches of 10000 (Frida's fast path: few messages), lets it run to its end, and
prints the program's output and the number of events received on stderr."""
import sys
import frida

SCRIPT = """
const f = Module.findExportByName(null, 'f') || DebugSymbol.getFunctionByName('f');
let batch = [];
Interceptor.attach(f, {
  onEnter(args) {
    batch.push([Date.now(), args[0].toInt32(), args[1].toInt32()]);
    if (batch.length >= 10000) { send(batch.length); batch = []; }
  }
});
rpc.exports = { flush() { const n = batch.length; batch = []; return n; } };
"""

def main():
    argv = sys.argv[1:]
    device = frida.get_local_device()
    got = [0]
    out = []
    device.on("output", lambda pid, fd, data: out.append(data))
    pid = device.spawn(argv, stdio="pipe")
    session = device.attach(pid)
    script = session.create_script(SCRIPT)
    script.on("message", lambda m, d: got.__setitem__(0, got[0] + (m.get("payload") or 0)))
    script.load()
    done = []
    session.on("detached", lambda *a: done.append(1))
    device.resume(pid)
    import time
    while not done:
        time.sleep(0.05)
    sys.stdout.write(b"".join(x for x in out if x).decode())
    print(f"frida events received: {got[0]} (the last partial batch is lost with the process)",
          file=sys.stderr)

main()
