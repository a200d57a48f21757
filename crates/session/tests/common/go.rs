//! Building Go fixture programs (`tests/fixtures/*.go`), for session's plan tests and kerf's
//! live tests (included by path in both).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `go` command: on PATH, else where Go's own installer or Debian's golang-go put it.
pub fn go_command() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join("go")).find(|g| g.is_file()));
    on_path
        .or_else(|| {
            ["/usr/local/go/bin/go", "/usr/lib/go/bin/go"]
                .iter()
                .map(PathBuf::from)
                .find(|g| g.is_file())
        })
        .expect("go is needed (Debian package golang-go; scripts/deps.sh installs it)")
}

/// `tests/fixtures/NAME.go` built by Go's toolchain (offline: no module downloads, no
/// toolchain switch) into `dir`.
pub fn build_go(name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/fixtures/{name}.go"));
    let work = dir.join(format!("{name}-go"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::copy(&src, work.join(format!("{name}.go"))).unwrap();
    std::fs::write(work.join("go.mod"), format!("module {name}\ngo 1.19\n")).unwrap();
    let out = work.join(name);
    let st = Command::new(go_command())
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&work)
        .env("GOCACHE", dir.join("gocache"))
        .env("GOPATH", dir.join("gopath"))
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "-mod=mod")
        .status()
        .expect("run go build");
    assert!(st.success(), "go build failed on {name}.go");
    out
}
