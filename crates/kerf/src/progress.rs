//! Progress on a terminal: one line on stderr, rewritten in place, only when stderr is a
//! terminal and the work has run long enough to be worth showing.

use kerf_tools::Progress;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct TermProgress {
    enabled: bool,
    start: Instant,
    state: Mutex<(String, bool)>,
}

impl TermProgress {
    pub fn new() -> Self {
        TermProgress {
            enabled: std::io::stderr().is_terminal(),
            start: Instant::now(),
            state: Mutex::new((String::new(), false)),
        }
    }

    fn show(&self, line: &str) {
        if !self.enabled || self.start.elapsed() < Duration::from_millis(300) {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.1 = true;
        let mut e = std::io::stderr().lock();
        let _ = write!(e, "\r\x1b[K{line}");
        let _ = e.flush();
    }

    /// Erase the progress line, if one was shown.
    pub fn finish(&self) {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.1 {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    }
}

impl Progress for TermProgress {
    fn phase(&self, name: &str) {
        {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            st.0 = name.to_string();
        }
        self.show(&format!("analysing: {name}"));
    }
    fn advance(&self, done: u64, total: u64) {
        let phase = self.state.lock().unwrap_or_else(|p| p.into_inner()).0.clone();
        self.show(&format!("analysing: {phase} {done}/{total} functions"));
    }
}
