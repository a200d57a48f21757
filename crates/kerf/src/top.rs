//! `kerf top`: the live terminal view (the state and screen are `kerf_tools::top`): a table of
//! timed functions with sparklines, expanded into callees or blocks and collapsed by keys, one
//! thread watched or all, each change a new round of probes on the same target.

use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use crossterm::{cursor, execute, terminal};
use kerf_session::live::{catch_signals, Choice, Sampling};
use kerf_tools::live::{run, Events, LiveOptions, TrapWarning, Until};
use kerf_tools::time::Time;
use kerf_tools::top::{Action, Key, Top};
use std::cell::Cell;
use std::io::Write;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// Functions to show: [MODULE:]SYMBOL or a glob, as for `kerf time`.
    #[arg(required = true)]
    functions: Vec<String>,
    /// Process to watch; with --kernel, the task probes are restricted to.
    #[arg(short, long, conflicts_with = "command")]
    pid: Option<i32>,
    /// Watch the running kernel (needs kerf's driver, kerf.ko).
    #[arg(long, conflicts_with = "command")]
    kernel: bool,
    /// Seconds between updates (and between looks at the keys).
    #[arg(long, default_value_t = 0.5, value_parser = crate::live::seconds, value_name = "SECONDS")]
    interval: f64,
    /// Keep virtual time (CPU time) too, as `kerf time --virtual`.
    #[arg(long = "virtual")]
    virtual_time: bool,
    /// Command to launch and watch: `-- CMD ARGS`.
    #[arg(last = true)]
    command: Vec<String>,
}

/// The terminal in raw mode on its alternate screen, restored when dropped (on every exit
/// path, errors included).
struct Screen;

impl Screen {
    fn open() -> std::io::Result<Screen> {
        terminal::enable_raw_mode()?;
        execute!(std::io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(Screen)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = execute!(std::io::stdout(), cursor::Show, terminal::LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
    }
}

/// Each sample updates the view, the pending keys are read, and the screen drawn.
struct View<'a> {
    top: &'a mut Top,
    title: String,
    stop: &'a Cell<bool>,
    action: Action,
    status: String,
    /// The process, whose threads are listed when asked for (`None`: the kernel).
    pid: Option<i32>,
}

impl View<'_> {
    fn keys(&mut self) {
        while let Ok(true) = event::poll(Duration::ZERO) {
            let Ok(Event::Key(k)) = event::read() else { continue };
            if k.kind != KeyEventKind::Press {
                continue;
            }
            let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
            let key = match k.code {
                // Raw mode: Ctrl-C is a key, not a signal.
                KeyCode::Char('c') if ctrl => Key::Quit,
                KeyCode::Up | KeyCode::Char('k') => Key::Up,
                KeyCode::Down | KeyCode::Char('j') => Key::Down,
                KeyCode::Enter | KeyCode::Right | KeyCode::Char('e') => Key::Expand,
                KeyCode::Left | KeyCode::Char('c') => Key::Collapse,
                KeyCode::Char('b') => Key::Blocks,
                KeyCode::Char('m') => Key::Metric,
                KeyCode::Char('t') => match self.pid {
                    Some(pid) => {
                        self.top.threads = kerf_session::live::ProcessTarget::threads_of(pid);
                        Key::Thread
                    }
                    None => {
                        self.status = "kerf: in the kernel, -p TASK chooses the task".into();
                        continue;
                    }
                },
                KeyCode::Char('q') | KeyCode::Esc => Key::Quit,
                _ => continue,
            };
            match self.top.key(key) {
                Action::None => {}
                a => {
                    self.action = a;
                    self.stop.set(true);
                }
            }
        }
    }

    fn draw(&self) {
        let (w, h) = terminal::size().map(|(w, h)| (w as usize, h as usize)).unwrap_or((120, 40));
        let mut lines = self.top.screen(&self.title, w, h);
        if !self.status.is_empty() {
            if let Some(l) = lines.get_mut(h.saturating_sub(2)) {
                *l = self.status.chars().take(w).collect();
            }
        }
        let mut out = std::io::stdout().lock();
        let _ = execute!(out, cursor::MoveTo(0, 0), terminal::Clear(terminal::ClearType::All));
        for (k, l) in lines.iter().enumerate() {
            let _ = execute!(out, cursor::MoveTo(0, k as u16));
            let _ = out.write_all(l.as_bytes());
        }
        let _ = out.flush();
    }
}

impl Events for View<'_> {
    fn say(&mut self, line: &str) {
        self.status = format!("kerf: {line}");
    }
    fn warn(&mut self, line: &str) {
        self.status = format!("kerf: warning: {line}");
    }
    fn live(&mut self, _table: &str) {}
    fn record(&mut self, sample: serde_json::Value) {
        self.top.update(&sample);
        self.keys();
        self.draw();
    }
}

pub fn run_top(args: Args) -> Result<(), crate::Error> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        let why =
            "kerf top draws on a terminal and reads its keys: run it in one (or use kerf time)";
        return Err(kerf_tools::ToolError::Usage(why.into()).into());
    }
    catch_signals();
    let choice = Choice { pid: args.pid, command: args.command.clone(), kernel: args.kernel };
    let (mut target, child) = crate::live::open_for_rounds(&choice)?;
    let title = match (&args.pid, args.kernel) {
        (_, true) => "the kernel".to_string(),
        (Some(p), _) => format!("process {p}"),
        _ => args.command.join(" "),
    };
    let mut top = Top::new(args.functions.clone());
    let pid = match &target {
        kerf_session::live::Target::Process(p) => Some(p.pid),
        kerf_session::live::Target::Kernel(_) => None,
    };
    let mut live = LiveOptions {
        tid: None,
        sampling: Sampling { interval: args.interval, duration: None, at_once: false },
        no_traps: false,
        trap_warning: TrapWarning::On,
        force_kind: None,
        plan_threads: None,
        live_table: false,
    };
    let ended = {
        let _screen = Screen::open()
            .map_err(|source| crate::Error::Output { path: "the terminal".into(), source })?;
        loop {
            let stop = Cell::new(false);
            let expanded: Vec<String> = top.expanded.iter().cloned().collect();
            let blocks: Vec<String> = top.blocks.iter().cloned().collect();
            let tool = Time::new(&top.functions, false)?
                .with_callees_of(expanded)
                .with_blocks_of(blocks)
                .with_virtual_time(args.virtual_time);
            top.new_round();
            live.tid = top.thread;
            target.restart_clock();
            let mut view = View {
                top: &mut top,
                title: title.clone(),
                stop: &stop,
                action: Action::None,
                status: String::new(),
                pid,
            };
            let report = run(&Until { tool, stop: &stop }, &mut target, &live, &mut view)?;
            let action = view.action;
            if let Some(e) = report.error {
                break Err(e);
            }
            match action {
                Action::Reinstall => continue,
                Action::Quit => break Ok(None),
                // The round ended on its own: the target ended, or a signal.
                Action::None => break Ok(report.stopped),
            }
        }
    };
    if let Some(mut c) = child {
        let _ = c.wait();
    }
    match ended {
        Ok(stopped) => {
            err_line!("kerf top: {} round{}", top.rounds, if top.rounds == 1 { "" } else { "s" });
            if let Some(s) = stopped {
                err_line!("kerf: {s}");
            }
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}
