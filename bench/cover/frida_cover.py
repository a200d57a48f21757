"""bench/cover/frida_cover.py PROGRAM ARGS...: the peer of `kerf cover` in bench/cover.sh:
Frida's Stalker following every thread of PROGRAM from its first instruction with block
coverage (each basic block reported once, when Stalker first compiles it: the way
frida-drcov and Lighthouse's Frida collector measure coverage), following the main thread
from `main` on (the program is single-threaded). Prints the program's own
stdout (its throughput lines), then "blocks N" (blocks Stalker reported) on stderr."""
import sys
import threading

import frida

JS = """
let blocks = 0;
function follow(id) {
  Stalker.follow(id, {
    events: { compile: true },
    onReceive(events) {
      blocks += Stalker.parse(events, { annotate: false }).length;
      send({ blocks });
    },
  });
}
// From main (PROGRAM is built with -rdynamic so that main is exported), on its thread.
Interceptor.attach(Module.getExportByName(null, 'main'), {
  onEnter() { follow(this.threadId); },
});
rpc.exports = { blocks() { Stalker.flush(); return blocks; } };
"""

def main():
    device = frida.get_local_device()
    out = []
    done = threading.Event()
    pid = device.spawn(sys.argv[1:], stdio="pipe")

    def on_output(p, fd, data):
        if p == pid and fd == 1 and data:
            sys.stdout.write(data.decode())
            sys.stdout.flush()

    def on_detached(*_):
        done.set()

    device.on("output", on_output)
    session = device.attach(pid)
    session.on("detached", on_detached)
    script = session.create_script(JS)
    blocks = [0]

    def on_message(msg, _):
        if msg.get("type") == "error":
            sys.stderr.write(str(msg) + "\n")
        elif msg.get("type") == "send":
            blocks[0] = msg["payload"]["blocks"]

    script.on("message", on_message)
    script.load()
    device.resume(pid)
    done.wait()
    sys.stderr.write(f"blocks {blocks[0]}\n")


if __name__ == "__main__":
    main()
