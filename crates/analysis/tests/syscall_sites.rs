//! `syscalls::syscall_sites` on real binaries finds exactly the `syscall` instructions a
//! decode of every block finds (it skips blocks whose bytes hold no `0f 05`, which no
//! `syscall` can be without; python3.11 has none of its own, and a large text to skip). Needs libc6 and python3.11 (Debian); a missing one fails the
//! test with the package to install.

use kerf_analysis::image::Image;
use kerf_analysis::syscalls::syscall_sites;
use kerf_analysis::{analyze, Quiet};
use kerf_arch::x86_64::Scanner;
use kerf_arch::ImageAddr;

/// `least`: how many `syscall`s the binary has at least (python3.11 leaves them to libc).
fn check(path: &str, package: &str, least: usize) {
    let data = std::fs::read(path)
        .unwrap_or_else(|e| panic!("{path}: {e} (install the Debian package {package})"));
    let image = Image::from_elf(path, &data).expect("parse");
    let a = analyze(&image, &Quiet);
    let mut want = Vec::new();
    for b in &a.cfg.blocks {
        let Some((base, bytes)) = image.code_at(b.start) else { continue };
        let mut sc = Scanner::new(bytes, base);
        let mut at = b.start.0;
        while at < b.start.0 + b.len as u64 {
            let Some(i) = sc.decode(ImageAddr(at)) else { break };
            if i.mnemonic() == iced_x86::Mnemonic::Syscall {
                want.push((b.func, at));
            }
            at = i.next_ip();
        }
    }
    want.sort_unstable_by_key(|w| w.1);
    let got: Vec<_> = syscall_sites(&a.cfg, &image).iter().map(|s| (s.func, s.addr.0)).collect();
    assert!(want.len() >= least, "{path}: only {} syscall instructions", want.len());
    assert_eq!(got, want, "{path}");
}

#[test]
fn libc_syscalls_all_found() {
    check("/usr/lib/x86_64-linux-gnu/libc.so.6", "libc6", 100);
}

#[test]
fn python_syscalls_all_found() {
    check("/usr/bin/python3.11", "python3.11-minimal", 0);
}
