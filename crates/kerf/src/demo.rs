//! `kerf demo`: kerf's main job on a built-in default. Launches a bundled multi-threaded
//! workload (this very binary, in a hidden mode), splices timers into its functions while its
//! threads run, shows live calls, time per call and concurrency, and detaches leaving it as
//! it was.

use std::hint::black_box;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(clap::Args)]
pub struct Args {
    /// Seconds to count for.
    #[arg(long, default_value_t = 3.0, value_parser = crate::live::seconds)]
    duration: f64,
    /// Worker threads in the workload.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Seconds between table updates.
    #[arg(long, default_value_t = 1.0, value_parser = crate::live::seconds)]
    interval: f64,
}

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

pub fn run(args: Args) -> Result<(), String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find kerf's own binary: {e}"))?;
    let mut child = Command::new(&me)
        .args(["__workload", &args.threads.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the demo workload: {e}"))?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout"))
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let pid = child.id() as i32;
    println!(
        "kerf demo: workload pid {pid} with {} threads; timing kerf:kerf_demo_* for {} s",
        args.threads, args.duration
    );
    let live = crate::live::LiveArgs {
        pid: Some(pid),
        tid: None,
        interval: args.interval,
        duration: Some(args.duration),
        json: false,
        output: None,
        force_kind: None,
        kernel: false,
        command: Vec::new(),
    };
    let result = crate::time::time(&live, &["kerf:kerf_demo_*".to_string()], false);
    let _ = child.kill();
    let _ = child.wait();
    result
}
