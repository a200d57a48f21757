//! `kerf jit --callback FILE.c`: user callbacks in C (Frida's CModule is the peer), compiled at
//! run time by the system's compiler into position-independent code that the JIT copies next
//! to every module's code cache, and called from the translated code with the machine state
//! saved (the IR's `call`: the caller-saved registers and flags that are live saved, the stack
//! aligned, the red zone left alone).
//!
//! The file defines any of:
//! ```c
//! void kerf_block(unsigned long *state, unsigned long addr);  /* before every block */
//! void kerf_exit(unsigned long *state, unsigned long addr);   /* before every ret and tail call */
//! ```
//! `addr` is the original address of the block or instruction; `state` points to
//! [`STATE_WORDS`] words of zeroed memory shared with kerf, which prints the words that are not
//! zero at the end. Callbacks run on any thread at once (use `__atomic` builtins), must not
//! use vector registers (they are compiled with `-mgeneral-regs-only`: the call saves only
//! the general registers) and cannot call libraries (nothing is linked in); a file that needs
//! a symbol from elsewhere, or keeps state in globals (the code is copied once per module: a
//! global would not be one), is refused with the linker's or kerf's reason.

use crate::error::ToolError;
use kerf_codegen::ir::{Op, Program, Src};
use std::path::Path;
use std::process::Command;

/// Words of shared state the callbacks get.
pub const STATE_WORDS: u64 = 4096;

/// The hooks a callback file may define, in the order of [`Callback::hooks`].
const HOOKS: [&str; 2] = ["kerf_block", "kerf_exit"];

/// A compiled callback file: its code (linked at 0, position-independent) and the offsets of
/// the hooks it defines.
pub struct Callback {
    pub code: Vec<u8>,
    /// Per hook of [`HOOKS`], its offset in `code`.
    hooks: [Option<u64>; 2],
}

/// The linker script: code and read-only data together from address 0; anything writable is
/// kept apart, to be refused.
const SCRIPT: &str = "SECTIONS {
  . = 0;
  .text : { *(.text .text.*) *(.rodata .rodata.*) }
  .data : { *(.data .data.* .bss .bss.* COMMON) }
  /DISCARD/ : { *(.comment) *(.note .note.*) *(.eh_frame .eh_frame_hdr) }
}
";

impl Callback {
    /// Compile and link `file` with the system's `cc` and `ld` into a scratch directory.
    pub fn build(file: &Path) -> Result<Callback, ToolError> {
        let fail =
            |what: String| ToolError::Usage(format!("--callback {}: {what}", file.display()));
        if !file.exists() {
            return Err(fail("no such file".into()));
        }
        let dir = std::env::temp_dir().join(format!("kerf-callback-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| fail(format!("{}: {e}", dir.display())))?;
        let built = Callback::build_in(file, &dir, &fail);
        let _ = std::fs::remove_dir_all(&dir);
        built
    }

    fn build_in(
        file: &Path,
        dir: &Path,
        fail: &dyn Fn(String) -> ToolError,
    ) -> Result<Callback, ToolError> {
        let (obj, out, script) = (dir.join("cb.o"), dir.join("cb.elf"), dir.join("cb.ld"));
        std::fs::write(&script, SCRIPT).map_err(|e| fail(e.to_string()))?;
        let run = |cmd: &mut Command, what: &str| -> Result<(), ToolError> {
            let o = cmd.output().map_err(|e| fail(format!("{what}: {e}")))?;
            if !o.status.success() {
                let why = String::from_utf8_lossy(&o.stderr).trim().to_string();
                return Err(fail(format!("{what} failed:\n{why}")));
            }
            Ok(())
        };
        // Position-independent (every reference rip-relative: the bytes run anywhere), no
        // vector registers, nothing that needs a library or thread-local storage.
        let flags = [
            "-O2",
            "-fpie",
            "-ffreestanding",
            "-fno-stack-protector",
            "-fno-asynchronous-unwind-tables",
            "-fno-jump-tables",
            "-fno-builtin",
            "-mgeneral-regs-only",
            "-c",
        ];
        run(Command::new("cc").args(flags).arg(file).arg("-o").arg(&obj), "cc")?;
        run(
            Command::new("ld")
                .arg("-T")
                .arg(&script)
                .arg("--no-undefined")
                .arg(&obj)
                .arg("-o")
                .arg(&out),
            "ld",
        )?;
        let elf = std::fs::read(&out).map_err(|e| fail(e.to_string()))?;
        let image = kerf_analysis::image::Image::from_elf("callback", &elf)
            .map_err(|e| fail(format!("reading what the linker made: {e}")))?;
        let mut code = Vec::new();
        for s in image.sections.iter().filter(|s| s.alloc && s.size > 0) {
            match s.name.as_str() {
                ".text" => {
                    let bytes = image.section_bytes(s).ok_or_else(|| fail("no code".into()))?;
                    code = bytes.to_vec();
                }
                name => {
                    let why = format!(
                        "section {name} ({} bytes): a callback keeps its state in the words it is \
                         given, not in globals, and has no pointers to relocate",
                        s.size
                    );
                    return Err(fail(why));
                }
            }
        }
        let mut hooks = [None; 2];
        for (k, h) in HOOKS.iter().enumerate() {
            hooks[k] = image.symbols.iter().find(|s| s.name == *h).map(|s| s.addr.0);
        }
        if hooks.iter().all(Option::is_none) {
            return Err(fail(format!("defines none of {}", HOOKS.join(", "))));
        }
        Ok(Callback { code, hooks })
    }

    /// Whether the file defines `kerf_exit`.
    pub fn has_exit(&self) -> bool {
        self.hooks[1].is_some()
    }

    /// Append the call of `kerf_block` (`exit`: `kerf_exit`) for original address `addr` to
    /// `p`, the routines copied at `routines`, the state at `state`.
    pub fn call(&self, p: &mut Program, exit: bool, routines: u64, state: u64, addr: u64) {
        let Some(off) = self.hooks[exit as usize] else { return };
        if routines == 0 {
            return;
        }
        let args = vec![Src::Imm(state), Src::Imm(addr)];
        p.push(Op::Call { target: routines + off, args, ret: None });
    }
}
