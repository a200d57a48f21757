"""bench/jit/stalker.py MODE MAIN PROGRAM ARGS...: Frida's Stalker, the peer of `kerf jit main`
in bench/jit.sh. MAIN is main's address in the executable's image (hex, from `kerf analyze
--functions`); PROGRAM is launched stopped, Stalker follows the thread that calls main from
there on, and the program's stdout is its own (inherited). MODE:
  none    Stalker with nothing added (its code cache alone);
  blocks  every block counted: a transform (CModule, compiled by Frida) puts an inline
          counter at each block's start (red zone skipped, rax saved, the block's own 64-bit
          word loaded, `lea`+1, stored: no flag touched, since Stalker knows no liveness
          and would have to save them), exact for one thread;
  calls   call and return events (Stalker's own), the queue enlarged so that none is
          dropped, counted as they arrive.
Prints on stderr a line "stalker MODE: blocks N executions M" or "... events N"."""
import json
import sys
import threading

import frida

CMODULE = r"""
/* Frida 17's bundled capstone.h stops at a #pragma without one of the compilers it knows. */
#define __GNUC__ 4
#include <gum/gumstalker.h>

#define SLOTS (1 << 21)
/* (Writable state is the script's memory: a CModule's own data is not writable.) */
extern guint64 counts[SLOTS];
extern guint next;

guint64 total(void) { guint64 s = 0; for (guint i = 0; i < next && i < SLOTS; i++) s += counts[i]; return s; }
guint used(void) { return next; }

void transform(GumStalkerIterator *iterator, GumStalkerOutput *output, gpointer user_data) {
  GumX86Writer *cw = output->writer.x86;
  gboolean first = TRUE;
  while (gum_stalker_iterator_next(iterator, NULL)) {
    if (first && next < SLOTS) {
      /* lea rsp, [rsp-128]; push rax; mov rax, [slot]; lea rax, [rax+1]; mov [slot], rax;
         pop rax; lea rsp, [rsp+128]: no flag touched, so none saved. */
      guint64 slot = GUM_ADDRESS(&counts[next++]);
      guint8 load[2] = { 0x48, 0xa1 }, inc[4] = { 0x48, 0x8d, 0x40, 0x01 }, store[2] = { 0x48, 0xa3 };
      gum_x86_writer_put_lea_reg_reg_offset(cw, GUM_X86_RSP, GUM_X86_RSP, -128);
      gum_x86_writer_put_push_reg(cw, GUM_X86_RAX);
      gum_x86_writer_put_bytes(cw, load, 2);
      gum_x86_writer_put_bytes(cw, (guint8 *) &slot, 8);
      gum_x86_writer_put_bytes(cw, inc, 4);
      gum_x86_writer_put_bytes(cw, store, 2);
      gum_x86_writer_put_bytes(cw, (guint8 *) &slot, 8);
      gum_x86_writer_put_pop_reg(cw, GUM_X86_RAX);
      gum_x86_writer_put_lea_reg_reg_offset(cw, GUM_X86_RSP, GUM_X86_RSP, 128);
    }
    first = FALSE;
    gum_stalker_iterator_keep(iterator);
  }
}
"""

JS = """
const P = PARAMS;
const mode = P.mode;
const exe = Process.enumerateModules()[0];
// (A PIE's image addresses start at 0; a fixed executable's are its addresses.)
const main = ptr(P.main).compare(exe.base) >= 0 ? ptr(P.main) : exe.base.add(P.main);
let events = 0;
let cm = null;
if (mode === 'blocks') cm = new CModule(P.cmodule, { counts: Memory.alloc(8 << 21), next: Memory.alloc(8) });
if (mode === 'calls') { Stalker.queueCapacity = 1 << 22; Stalker.queueDrainInterval = 50; }
const opts = {};
if (mode === 'blocks') opts.transform = cm.transform;
if (mode === 'calls') {
  opts.events = { call: true, ret: true };
  opts.onReceive = (ev) => { events += ev.byteLength / 32; };
}
Interceptor.attach(main, { onEnter() { Stalker.follow(this.threadId, opts); } });
function report() {
  if (mode === 'blocks') {
    const total = new NativeFunction(cm.total, 'uint64', []);
    const used = new NativeFunction(cm.used, 'uint', []);
    return `blocks ${used()} executions ${total()}`;
  }
  if (mode === 'calls') { Stalker.flush(); return `events ${events}`; }
  return 'none';
}
// At exit, before the process is gone: the counts, and a wait until this harness has them.
const exit = Module.getGlobalExportByName('exit');
Interceptor.attach(exit, { onEnter() { send(report()); recv('ack', () => {}).wait(); } });
"""


def main():
    mode, addr, argv = sys.argv[1], int(sys.argv[2], 16), sys.argv[3:]
    device = frida.get_local_device()
    done = threading.Event()
    pid = device.spawn(argv, stdio="inherit")
    session = device.attach(pid)
    session.on("detached", lambda *a: done.set())
    params = {"mode": mode, "main": hex(addr), "cmodule": CMODULE}
    js = JS.replace("PARAMS", json.dumps(params))
    script = session.create_script(js)
    said = []

    def on_message(msg, _):
        if msg.get("type") == "error":
            sys.stderr.write(f"stalker: {msg.get('description')}\n")
        elif msg.get("type") == "send":
            said.append(msg["payload"])
            script.post({"type": "ack"})

    script.on("message", on_message)
    script.load()
    device.resume(pid)
    done.wait()
    sys.stderr.write(f"stalker {mode}: {said[-1] if said else 'no report'}\n")


if __name__ == "__main__":
    main()
