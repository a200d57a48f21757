//! The demo: a bundled multi-threaded workload (the `kerf` binary itself, in a hidden mode)
//! whose small functions kerf times while its threads run, and the driver that starts it.

use crate::error::ToolError;
use std::hint::black_box;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

/// The functions the demo times in the workload.
pub const FUNCTIONS: &str = "kerf:kerf_demo_*";

/// The workload's functions: small, not inlined, with plain names kerf can find.
#[no_mangle]
#[inline(never)]
pub extern "C" fn kerf_demo_hash(x: u64) -> u64 {
    let mut h = x ^ 0x9e37_79b9_7f4a_7c15;
    for _ in 0..4 {
        h = (h ^ (h >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    }
    h
}

#[no_mangle]
#[inline(never)]
pub extern "C" fn kerf_demo_classify(x: u64) -> u64 {
    match x % 5 {
        0 => x / 3,
        1 => x.wrapping_mul(7),
        2 => x ^ 0xff,
        3 => x.rotate_left(7),
        _ => x + 1,
    }
}

#[no_mangle]
#[inline(never)]
pub extern "C" fn kerf_demo_rare(x: u64) -> u64 {
    black_box(x.count_ones() as u64)
}

/// Recursive, to show that a timer counts a recursion's time once.
#[no_mangle]
#[inline(never)]
pub extern "C" fn kerf_demo_fib(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        kerf_demo_fib(black_box(n - 1)) + kerf_demo_fib(n - 2)
    }
}

/// Blocks for a millisecond, as a thread waiting for I/O would: its concurrency shows how
/// many threads are waiting on average.
#[no_mangle]
#[inline(never)]
pub extern "C" fn kerf_demo_wait(x: u64) -> u64 {
    std::thread::sleep(std::time::Duration::from_millis(1));
    black_box(x)
}

static RUN: AtomicBool = AtomicBool::new(true);

/// The hidden workload: `threads` threads calling the demo functions until killed.
pub fn workload(threads: usize) -> ! {
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut x = t as u64 + 1;
                while RUN.load(Ordering::Relaxed) {
                    for _ in 0..2000 {
                        x = kerf_demo_hash(black_box(x));
                        x = kerf_demo_classify(x);
                        if x.is_multiple_of(64) {
                            x = x.wrapping_add(kerf_demo_rare(x));
                        }
                    }
                    x = x.wrapping_add(kerf_demo_fib(black_box(15)));
                    x = kerf_demo_wait(x);
                }
                x
            })
        })
        .collect();
    println!("ready");
    for h in handles {
        black_box(h.join().ok());
    }
    std::process::exit(0)
}

/// The workload, running: killed and waited for when dropped.
pub struct Workload {
    child: Child,
}

impl Workload {
    /// Start `exe` (the kerf binary) as the workload with `threads` threads (its hidden
    /// `__workload` command), and wait until its threads run.
    pub fn start(exe: &std::path::Path, threads: usize) -> Result<Workload, ToolError> {
        let mut child = Command::new(exe)
            .args(["__workload", &threads.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|source| ToolError::Io { what: "cannot start the demo workload: ", source })?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .map_err(|source| ToolError::Io { what: "", source })?;
        Ok(Workload { child })
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// kerf's own binary, which holds the workload.
pub fn own_binary() -> Result<std::path::PathBuf, ToolError> {
    std::env::current_exe()
        .map_err(|source| ToolError::Io { what: "cannot find kerf's own binary: ", source })
}
