//! `kerf trace`: the tracer as a live tool. It resolves each probe line's point, builds one IR
//! program per traced function ([`super::program`]), lays its streams' flags, counters and
//! per-thread rings out in the tool's area of every data heap, and while the target runs drains
//! the rings (shared memory: no system call per event) into events on CLOCK_MONOTONIC, merged
//! in time order, for any [`Sink`]. Losses are counted per stream and reported as they happen,
//! in the summary and in every output; the summary checks emitted = filtered + delivered + lost.

use super::event::{
    CaptureInfo, Counters, Loss, LossOrigin, PointKind, ProbeInfo, Record, Source, SourceKind,
    StreamInfo, Tables, ThreadInfo,
};
use super::probe::{self, Expr, ProbeLine};
use super::program::{self, AreaLayout, Decode, TidSource};
use super::unpack::{Clock, RingWatch, SourceDecode, Unpacker};
use super::{Sink, Summary};
use crate::error::ToolError;
use crate::live::{resolve, site_json, Events, LiveTool, TargetKind};
use kerf_arch::x86_64::RegSet;
use kerf_codegen::ir::{self, Rings};
use kerf_codegen::ring;
use kerf_session::instrument::{Action, Probe, ToolData};
use kerf_session::kernel::KernelInstrumentation;
use kerf_session::live::{Installed, KernelTarget, Sampling};
use kerf_session::spec::{self, Spec};
use kerf_session::AnalyzedImage;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

/// Slots of each thread's ring per stream in a process, unless `--ring-slots` says.
pub const DEFAULT_SLOTS: u32 = 4096;
/// In the kernel, where rings are per CPU: slots of each CPU's ring per stream, at most (the
/// driver's data heap, 16 MiB, keeps [`KERNEL_RING_BYTES`] for all of them).
pub const KERNEL_SLOTS: u32 = 8192;
/// The kernel's rings, all streams and CPUs: what is left of the driver's 16 MiB data heap
/// for counters, timers and other tools' areas.
const KERNEL_RING_BYTES: u64 = 12 << 20;
/// The key of a stream area's count of events with no ring (their thread found no slot).
const NO_SLOT_KEY: u64 = u64::MAX;
/// How often the reader drains the rings.
const DRAIN_SECONDS: f64 = 0.002;
/// How long one tick may go on draining busy rings before the live loop looks at the target
/// (its end, signals) again; it ticks again at once.
const BUSY_BUDGET: std::time::Duration = std::time::Duration::from_millis(50);
/// The reader drains again before the fullest ring could fill at the rate it filled since
/// the last drain, with this margin (a quarter of the time it would take).
const FILL_MARGIN: f64 = 0.25;
/// The reader drains again, too, before a ring holds more than this many bytes of records:
/// a drain's copy then stays within the caches (here 1 MiB of L2 a core), and a stall that
/// comes next finds the ring nearly empty. A large ring is room for bursts and stalls, not a
/// reason to wait.
const NEAR_BYTES: f64 = 256.0 * 1024.0;
const SHORTEST_NAP: f64 = 0.0005;
/// How long after the table is made the reader keeps looking every [`WARM_UP_GAP`] seconds.
const WARM_UP: std::time::Duration = std::time::Duration::from_millis(50);
const WARM_UP_GAP: f64 = 0.0001;
const PEAK_DECAY_SECONDS: f64 = 0.1;
/// How often the reader looks at every ring, not only those in use: a new thread's ring is
/// first drained within this (a ring of 16384 slots holds 0.8 ms at 20 M events/s).
const FULL_PASS: std::time::Duration = std::time::Duration::from_micros(500);
/// How often the reader frees the thread table slots of forked children that have ended.
const FREE_SLOTS_EVERY: std::time::Duration = std::time::Duration::from_millis(100);
/// How long a record reserved and not complete holds back younger records of other rings
/// (its writer preempted: usually well under this; killed or stopped by a debugger in the
/// middle of the record: for ever, which must not stall the trace).
const PENDING_PATIENCE_NS: f64 = 1e9;

/// Where events go.
pub enum Output {
    /// Text lines, returned by each drain for the live view.
    Live,
    /// Any other output (a file in some format, a sender).
    Sink(Box<dyn Sink>),
    /// A raw trace of packed records: each drain's ring records go out as the rings hold
    /// them, undecoded, so that the reader keeps up with the highest rates; `kerf trace
    /// convert` decodes and orders them. (`None` once finished.)
    Packed(Option<super::raw::Writer<Box<dyn std::io::Write>>>),
}

impl Output {
    /// A raw trace into `out`, packed.
    pub fn packed(out: Box<dyn std::io::Write>) -> Result<Output, super::raw::RawError> {
        Ok(Output::Packed(Some(super::raw::Writer::new_packed(out)?)))
    }
}

/// The tracer: its parsed probe lines and options.
pub struct Trace {
    lines: Vec<ProbeLine>,
    specs: Vec<Spec>,
    /// Lines for the kernel beside a process (`kernel:POINT ...`): one timeline of both.
    kernel_lines: Vec<ProbeLine>,
    kernel_specs: Vec<Spec>,
    /// The kernel those lines go into, once opened (it lives as long as kerf).
    kernel_target: Option<&'static KernelTarget>,
    kernel: RefCell<Option<KernelSide>>,
    /// The process traced (known once it is chosen), whose tasks alone `kernel:` lines see.
    pid: std::cell::Cell<Option<i32>>,
    /// `--ring-slots` (`None`: the target's default), and what the main target's rings got.
    slots: Option<u32>,
    slots_used: std::cell::Cell<Option<u32>>,
    /// The offsets of `task_struct.pid` and `.tgid` (the kernel's thread and process ids), from
    /// the kernel's BTF.
    task_ids: std::cell::Cell<(Option<u32>, Option<u32>)>,
    /// Streams that start switched off.
    off: Vec<String>,
    /// A file of `on NAME` / `off NAME` lines, applied as they are appended.
    control: Option<std::path::PathBuf>,
    output: RefCell<Option<Output>>,
    /// TSC and CLOCK_MONOTONIC read before the probes went in (the calibration's start).
    clock_start: (u64, u64),
    /// Why writing or sending the trace failed, once it has.
    output_error: RefCell<Option<String>>,
}

impl Trace {
    /// Parse the probe lines (before anything is done to a target). With `kernel_target`
    /// the target is the kernel and a `kernel:` prefix changes nothing; else lines with it go
    /// to the kernel beside the process ([`Trace::with_kernel`]).
    pub fn new(
        lines: &[String],
        kernel_target: bool,
        slots: Option<u32>,
        off: Vec<String>,
        control: Option<std::path::PathBuf>,
        output: Output,
    ) -> Result<Trace, ToolError> {
        let (mut ours, mut kernel) = (Vec::new(), Vec::new());
        for l in lines {
            match l.trim_start().strip_prefix("kernel:") {
                Some(rest) if kernel_target => ours.push(probe::parse(rest)?),
                Some(rest) => kernel.push(probe::parse(rest)?),
                None => ours.push(probe::parse(l)?),
            }
        }
        let parse_specs = |ls: &[ProbeLine]| {
            ls.iter().map(|l| spec::parse(&l.point)).collect::<Result<Vec<_>, _>>()
        };
        let (specs, kernel_specs) = (parse_specs(&ours)?, parse_specs(&kernel)?);
        let lines = ours;
        // The most that fits: a process's 256 thread rings a stream within the IR's bound on
        // an area of rings; the kernel's per-CPU rings of one stream within its share of the
        // driver heap.
        let max = if kernel_target {
            let cpus = u64::from(kernel_rings());
            1u64 << (KERNEL_RING_BYTES / cpus / u64::from(ring::MAX_SLOT_LEN)).max(1).ilog2()
        } else {
            max_thread_slots()
        };
        if let Some(slots) =
            slots.filter(|&s| !s.is_power_of_two() || !(2..=max).contains(&u64::from(s)))
        {
            let whose = if kernel_target { "a CPU's ring" } else { "a thread's ring" };
            return Err(ToolError::Usage(format!(
                "--ring-slots {slots}: a power of two from 2 to {max} ({whose}, up to 128 bytes \
                 a slot)"
            )));
        }
        Ok(Trace {
            lines,
            specs,
            kernel_lines: kernel,
            kernel_specs,
            kernel_target: None,
            kernel: RefCell::new(None),
            pid: std::cell::Cell::new(None),
            slots,
            slots_used: std::cell::Cell::new(None),
            task_ids: std::cell::Cell::new((None, None)),
            off,
            control,
            output: RefCell::new(Some(output)),
            clock_start: kerf_os::clock::tsc_and_monotonic(),
            output_error: RefCell::new(None),
        })
    }

    /// Whether some lines are for the target itself (not `kernel:` lines beside it).
    pub fn has_own_lines(&self) -> bool {
        !self.lines.is_empty()
    }

    /// Whether some lines are for the kernel beside a process (the caller opens the kernel
    /// and hands it to [`Trace::with_kernel`]).
    pub fn wants_kernel(&self) -> bool {
        !self.kernel_lines.is_empty()
    }

    /// The kernel the `kernel:` lines go into. It is kept until kerf exits.
    pub fn with_kernel(mut self, k: KernelTarget) -> Trace {
        self.kernel_target = Some(Box::leak(Box::new(k)));
        self
    }

    /// Why the trace's output failed (a full disk, a collector that never answered), after
    /// the run: the events after the failure are not in it.
    pub fn output_error(&self) -> Option<String> {
        self.output_error.borrow().clone()
    }
}

/// The kernel's probes of a trace of a process and the kernel: what was built, what is in.
struct KernelSide {
    built: Built,
    probes: Vec<Probe>,
    inst: KernelInstrumentation<'static>,
}

/// What the tracer built for one target.
pub struct Built {
    area: AreaLayout,
    /// Per probe table entry: how its records decode, and its stream.
    decode: Vec<Decode>,
    probes: Vec<ProbeInfo>,
    streams: Vec<StreamInfo>,
    /// Exits that are a tail call's jump, where a line reads `ret`: the function jumped to
    /// returns the value later, and what `rax` holds at the jump is no return value.
    tail_ret: Vec<String>,
}

/// The most slots a thread's ring can have: the largest power of two whose area (256 rings
/// of the longest slots, with their headers) is within the IR's bound.
fn max_thread_slots() -> u64 {
    let mut s: u32 = 1 << 30;
    while s > 2 && ring::thread_rings_len(ring::Shape::long(s)) > ir::MAX_THREAD_RINGS_LEN {
        s /= 2;
    }
    u64::from(s)
}

/// Free the thread table slots of forked children that have ended, once every stream's ring
/// of the slot has been drained (`Installed::free_ended_children`): without it, after 256
/// children that ran probed code new threads would find no slot.
fn free_ended_children(sides: &[Side<'_>], sources: &[SourceState]) {
    for (src, side) in sides.iter().enumerate() {
        let (built, inst) = (side.built, side.inst);
        let pid = sources.get(src).map_or(0, |s| s.pid);
        if pid == 0 || built.area.per != Rings::Thread {
            continue;
        }
        let drained = |h: usize, k: u64| {
            let Some(shared) = inst.ring_words(h) else { return true };
            let word = |o: u64| {
                let i = (o / 8) as usize;
                shared.get(i).map_or(0, |w| w.load(std::sync::atomic::Ordering::Acquire))
            };
            (0..built.streams.len() as u32).all(|s| {
                let ring = built.area.rings(s) + ring::thread_ring(k, built.area.shape(s));
                word(ring + ring::HEAD) == word(ring + ring::TAIL)
            })
        };
        inst.free_ended_children(pid as i32, &drained);
    }
}

/// Per-CPU rings for the kernel: one for each CPU this machine may bring up (kerf runs on
/// the machine it traces), rounded up to a power of two.
fn kernel_rings() -> u32 {
    let possible = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    // "0-3", "0", or "0-3,8-11": the highest CPU number plus one.
    let top = possible
        .trim()
        .split([',', '-'])
        .filter_map(|n| n.parse::<u32>().ok())
        .max()
        .map_or(1, |m| m + 1);
    top.clamp(1, ir::MAX_CPU_RINGS).next_power_of_two()
}

/// Slots of each kernel ring: [`KERNEL_SLOTS`], fewer when the CPUs and streams would not
/// fit [`KERNEL_RING_BYTES`] (a power of two, at least 64).
fn kernel_slots(per: Rings, streams: usize) -> u32 {
    let rings = per.count() * streams.max(1) as u64;
    let each = KERNEL_RING_BYTES / rings / u64::from(ring::MAX_SLOT_LEN);
    let fit = if each == 0 { 1 } else { 1u64 << each.ilog2() };
    fit.clamp(64, u64::from(KERNEL_SLOTS)) as u32
}

/// The stream name a probe defaults to: its module's file name up to `.so`, or `kernel`.
fn default_stream(images: &[AnalyzedImage], module: usize, kind: TargetKind) -> String {
    if kind == TargetKind::Kernel {
        return "kernel".into();
    }
    let n = spec::module_name(&images[module].path.to_string_lossy()).to_string();
    n.split(".so").next().unwrap_or(&n).to_string()
}

/// The point of function `func` that the glob `point` (`[MODULE:]PATTERN[@exits]`) found, as
/// if it had been written out: `libc:*open*@exits` and `open64` give `libc:open64@exits`.
/// `None` for a point without a glob (it names its function already).
fn glob_point(point: &str, func: &str) -> Option<String> {
    let (head, tail) = point.split_at(point.find('@').unwrap_or(point.len()));
    let (module, pattern) = head.rsplit_once(':').map_or(("", head), |(m, p)| (m, p));
    if !pattern.contains(['*', '?', '[']) {
        return None;
    }
    let sep = if module.is_empty() { "" } else { ":" };
    Some(format!("{module}{sep}{func}{tail}"))
}

impl Trace {
    /// The probes, programs and tables of `lines` (with their `specs`) in a target of `kind`.
    fn build_for(
        &self,
        lines: &[ProbeLine],
        specs: &[Spec],
        images: &[AnalyzedImage],
        aliases: &[Vec<String>],
        kind: TargetKind,
        only: Option<(u32, u32)>,
    ) -> Result<(Vec<Probe>, ToolData, Built), ToolError> {
        let tid = match kind {
            TargetKind::Process => kerf_session::instrument::glibc_tid_offset(images)
                .map_or(TidSource::Unknown, TidSource::At),
            TargetKind::Kernel => match self.task_ids.get() {
                (Some(pid), Some(tgid)) if tgid == pid + 4 => TidSource::Pair(pid),
                (Some(pid), _) => TidSource::At(pid),
                (None, _) => TidSource::Unknown,
            },
        };
        // --ring-slots sizes the main target's rings; the kernel's beside a process keep the
        // driver heap's default.
        let per = match kind {
            TargetKind::Process => Rings::Thread,
            TargetKind::Kernel => Rings::Cpu(kernel_rings()),
        };
        // Probe table entries: one per line and traced function for entries and exits (they
        // share the function's name, so that they pair up as slices), one per point for the
        // others (a block, an offset: its label names it, `func+0x12`).
        let mut entries: Vec<(usize, String, PointKind, String, Option<String>)> = Vec::new();
        let mut points = Vec::new();
        let mut tail_ret = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let resolved = resolve(images, aliases, std::slice::from_ref(&specs[i]))?;
            let mut by_func: HashMap<(usize, u64), usize> = HashMap::new();
            for p in resolved {
                let module = p.module;
                let cfg = &images[module].analysis.cfg;
                let func = &cfg.functions[p.func.0 as usize];
                let term = cfg.block_containing(p.func, p.addr).map(|b| cfg.block(b).term);
                if line.uses_ret
                    && p.at_exit
                    && term.is_some_and(|t| t != kerf_analysis::cfg::Terminator::Return)
                {
                    tail_ret.push(p.label.clone());
                }
                let kind_here = if p.at_exit {
                    PointKind::Exit
                } else if p.addr == func.entry && !line.point.ends_with("@blocks") {
                    PointKind::Entry
                } else {
                    PointKind::Instant
                };
                let instant = kind_here == PointKind::Instant;
                let key = (module, if instant { p.addr.0 } else { u64::from(p.func.0) | 1 << 63 });
                let e = *by_func.entry(key).or_insert_with(|| {
                    let stream =
                        line.stream.clone().unwrap_or_else(|| default_stream(images, module, kind));
                    let (name, at) = if instant {
                        (p.label.clone(), Some(p.label.clone()))
                    } else {
                        (func.name.clone(), glob_point(&line.point, &func.name))
                    };
                    entries.push((i, name, kind_here, stream, at));
                    entries.len() - 1
                });
                points.push((p, e));
            }
        }
        let mut streams: Vec<StreamInfo> = Vec::new();
        let mut stream_of = Vec::new();
        for (_, _, _, s, _) in &entries {
            let k = match streams.iter().position(|x| &x.name == s) {
                Some(k) => k,
                None => {
                    streams.push(StreamInfo { name: s.clone() });
                    streams.len() - 1
                }
            };
            stream_of.push(k);
        }
        // (In a trace of a process and the kernel, the name may be the other side's.)
        for name in self.off.iter().filter(|_| self.kernel_lines.is_empty()) {
            if !streams.iter().any(|s| &s.name == name) {
                return Err(ToolError::Usage(format!("--off {name}: no probe is in that stream")));
            }
        }
        let slots = match (kind, only) {
            (TargetKind::Kernel, Some(_)) => kernel_slots(per, streams.len()),
            (TargetKind::Kernel, None) => {
                self.slots.unwrap_or_else(|| kernel_slots(per, streams.len()))
            }
            (TargetKind::Process, _) => self.slots.unwrap_or(DEFAULT_SLOTS),
        };
        if only.is_none() {
            self.slots_used.set(Some(slots));
        }
        // Each stream's slots: the shortest that hold its probes' longest record, which the
        // programs built for the longest slots tell.
        let kernel = kind == TargetKind::Kernel;
        let build = |k: usize, area: &AreaLayout| {
            let line = &lines[entries[k].0];
            program::build(line, k as u32, stream_of[k] as u32, area, tid, kernel, only)
                .map_err(|e| ToolError::Usage(format!("probe '{}': {}", line.text, e.0)))
        };
        let long = AreaLayout::long(per, slots, streams.len() as u32);
        let mut words = vec![0; streams.len()];
        for k in 0..entries.len() {
            let (prog, _) = build(k, &long)?;
            let w = prog.ops.iter().map(|op| op.record_words()).max().unwrap_or(0);
            words[stream_of[k]] = words[stream_of[k]].max(w);
        }
        let lens = words.iter().map(|&w| ring::Shape::fitting(slots, w).slot_len).collect();
        let area = AreaLayout::new(per, slots, lens);
        let mut programs = Vec::new();
        let mut decode = Vec::new();
        let mut probes_info = Vec::new();
        for (k, (i, name, pk, _, at)) in entries.iter().enumerate() {
            let line = &lines[*i];
            let s = stream_of[k] as u32;
            let (prog, d) = build(k, &area)?;
            programs.push(prog);
            decode.push(d);
            let captures = line
                .captures
                .iter()
                .map(|c| CaptureInfo { name: c.name.clone(), hex: c.hex })
                .collect();
            probes_info.push(ProbeInfo {
                name: name.clone(),
                // A block or offset shows where it is, not the line's glob or `@blocks`; a
                // function a glob found shows its name.
                point: at.clone().unwrap_or_else(|| line.point.clone()),
                kind: *pk,
                stream: s as u16,
                captures,
            });
        }
        // The registers each program reads: an exit probe stays after their last writes.
        let reads: Vec<RegSet> = programs
            .iter()
            .map(|p: &kerf_codegen::ir::Program| {
                let mut set = RegSet::EMPTY;
                for op in &p.ops {
                    if let kerf_codegen::ir::Op::Reg { reg, .. } = op {
                        set.insert(*reg);
                    }
                }
                set
            })
            .collect();
        let probes = points
            .into_iter()
            .map(|(point, e)| Probe {
                point,
                action: Action::Program { program: e, reads: reads[e] },
            })
            .collect();
        // Streams start on unless switched off; the flags are written before any splice.
        let init = (0..streams.len() as u32)
            .filter(|&s| !self.off.contains(&streams[s as usize].name))
            .map(|s| (area.flag(s), 1))
            .collect();
        let tool = ToolData {
            timers: 0,
            off_cpu: 0..0,
            programs,
            area: area.bytes(),
            rings: area.ring_bytes(),
            init,
        };
        Ok((probes, tool, Built { area, decode, probes: probes_info, streams, tail_ret }))
    }

    /// The sources the reader drains: the live tool's target, and the kernel beside it.
    fn with_sides<R>(
        &self,
        built: &Built,
        inst: &dyn Installed,
        f: impl FnOnce(&[Side<'_>]) -> R,
    ) -> R {
        let k = self.kernel.borrow();
        let mut sides = vec![Side { built, inst }];
        if let Some(k) = k.as_ref() {
            sides.push(Side { built: &k.built, inst: &k.inst });
        }
        f(&sides)
    }
}

impl LiveTool for Trace {
    type Built = Built;
    type Table = Reader;

    fn build(
        &self,
        images: &[AnalyzedImage],
        aliases: &[Vec<String>],
        kind: TargetKind,
    ) -> Result<(Vec<Probe>, ToolData, Built), ToolError> {
        self.build_for(&self.lines, &self.specs, images, aliases, kind, None)
    }

    /// Memory and string captures read with `getpid` and `process_vm_readv` in the target's
    /// threads: under a seccomp filter they could be refused, or kill the process. Refused.
    fn check_process(&self, pid: i32) -> Result<(), ToolError> {
        self.pid.set(Some(pid));
        let reads =
            self.lines.iter().flat_map(|l| &l.captures).any(|c| matches!(c.expr, Expr::Mem { .. }));
        if !reads {
            return Ok(());
        }
        if kerf_os::process::seccomp_restricted(&kerf_os::process::RealSys, pid) {
            return Err(ToolError::Usage(format!(
                "process {pid} runs under seccomp: memory and string captures make \
                 system calls (getpid, process_vm_readv) in its threads that the filter may \
                 forbid or punish; capture registers and arguments only"
            )));
        }
        Ok(())
    }

    /// With `kernel:` lines beside a process: their probes into the kernel, before the
    /// process's (held, or a command not yet started) goes on, so the two start together.
    fn ready(&self, built: &Built, events: &mut dyn Events) -> Result<(), ToolError> {
        if let Some(first) = built.tail_ret.first() {
            events.warn(&format!(
                "{} exit(s) where `ret` is read are a tail call's jump ({first}{}): the function \
                 jumped to returns the value later, so `ret` there is whatever `rax` holds at \
                 the jump, not a return value (trace that function's exits for it)",
                built.tail_ret.len(),
                if built.tail_ret.len() > 1 { ", ..." } else { "" }
            ));
        }
        let Some(k) = self.kernel_target.filter(|_| self.wants_kernel()) else { return Ok(()) };
        self.task_ids.set((k.task_pid_offset(), k.task_tgid_offset()));
        // Only the process's own tasks: the kernel's events of one timeline with it.
        let pid = self.pid.get().unwrap_or(0) as u32;
        let only = k.task_tgid_offset().map(|off| (off, pid)).ok_or_else(|| {
            ToolError::Usage(
                "kernel: probes beside a process need task_struct.tgid from the kernel's BTF"
                    .into(),
            )
        })?;
        let (probes, data, kbuilt) = self.build_for(
            &self.kernel_lines,
            &self.kernel_specs,
            &k.kernel.images,
            &[],
            TargetKind::Kernel,
            Some(only),
        )?;
        for name in &self.off {
            let mut all = built.streams.iter().chain(&kbuilt.streams);
            if !all.any(|s| &s.name == name) {
                return Err(ToolError::Usage(format!("--off {name}: no probe is in that stream")));
            }
        }
        let inst = k.install(&probes, &data, None, false).map_err(ToolError::KernelInstall)?;
        let (n, refused) = (inst.sites().len(), inst.refused.len());
        events.say(&format!("kernel: {n} points spliced beside the process ({refused} refused)"));
        *self.kernel.borrow_mut() = Some(KernelSide { built: kbuilt, probes, inst });
        Ok(())
    }

    fn kernel_task_ids(&self, pid: Option<u32>, tgid: Option<u32>) {
        self.task_ids.set((pid, tgid));
    }

    fn sampling(&self, s: Sampling) -> Sampling {
        Sampling { interval: DRAIN_SECONDS, at_once: true, ..s }
    }

    fn table(&self, built: &Built, _probes: usize, inst: &dyn Installed) -> Reader {
        let output = self.output.borrow_mut().take().unwrap_or(Output::Live);
        let mut r = self.with_sides(built, inst, |sides| {
            let mut r = Reader::new(self.clock_start, sides, output);
            // A first full pass now, before a launched command goes on: kerf's first look at
            // every ring's header (a page each, faulted in here) took 4 ms, during which a
            // flood of 20 M events/s lost 80 k.
            let text = r.drain(sides, false);
            r.live.extend_from_slice(text.as_bytes());
            r
        });
        r.control = self.control.clone().map(|p| (p, 0, std::time::Instant::now()));
        r
    }

    /// Drain, and again as soon as the rings need it: at 10 M events/s a ring of 16384 slots
    /// fills in 1.6 ms, under the 2 ms between ticks. The reader keeps the fastest rate at
    /// which a ring filled lately (the share of its slots a drain found, over the time since
    /// the drain before, and the bytes of records; the peaks decay with a time constant of
    /// 0.1 s, since one drain's sample is noisy: a producer's bursts are shorter than a
    /// drain), and drains again after a quarter of the time a ring takes to fill at that rate,
    /// or once a ring holds [`NEAR_BYTES`], whichever comes first: at once when a ring was
    /// half full or more (the rate is then not known, only that the reader is behind), after
    /// a nap under a steady stream, at the next tick when that is sooner. For
    /// [`WARM_UP`] after the table is made it looks every [`WARM_UP_GAP`], rate known or not:
    /// a command launched under kerf may flood its rings from its first instruction. Up to a
    /// time budget, so that the target's end and signals are still noticed.
    fn render(&self, r: &mut Reader, built: &Built, inst: &dyn Installed) -> String {
        let start = std::time::Instant::now();
        self.with_sides(built, inst, |sides| {
            let mut text = String::new();
            loop {
                let began = std::time::Instant::now();
                // The warm-up's looks, 0.1 ms apart, would take a burst of a few thousand
                // events for a flood (and keep the reader spinning long after): the rates
                // start from what the whole warm-up found instead, and the first drain after
                // it counts from a tick before.
                let warming = r.made.elapsed() < WARM_UP;
                let since = r.drained_at.map_or(DRAIN_SECONDS, |t| (began - t).as_secs_f64());
                r.drained_at = (!warming).then_some(began);
                text.push_str(&r.drain(sides, false));
                let (share, bytes) = r.fullest;
                if warming {
                    if let Some(w) = &mut r.warm_sum {
                        (w.0, w.1) = (w.0 + share, w.1 + bytes);
                    }
                } else {
                    if let Some((s, b)) = r.warm_sum.take() {
                        let secs = WARM_UP.as_secs_f64();
                        (r.peak_fill_rate, r.peak_byte_rate) = (s / secs, b / secs);
                    }
                    let decay = (-since / PEAK_DECAY_SECONDS).exp();
                    r.peak_fill_rate = (share / since.max(1e-6)).max(r.peak_fill_rate * decay);
                    r.peak_byte_rate = (bytes / since.max(1e-6)).max(r.peak_byte_rate * decay);
                }
                if start.elapsed() >= BUSY_BUDGET || (r.peak_fill_rate <= 0.0 && !warming) {
                    break;
                }
                let mut wait = (FILL_MARGIN / r.peak_fill_rate).min(NEAR_BYTES / r.peak_byte_rate);
                if share >= 0.5 {
                    wait = 0.0;
                }
                if warming {
                    wait = wait.min(WARM_UP_GAP);
                }
                if wait >= DRAIN_SECONDS {
                    break;
                }
                // A short nap costs more than it saves (wake-up latency, and a core the
                // scheduler may give away): below half a millisecond, wait on the clock,
                // touching no shared memory (each look at a ring's head takes its cache line
                // from the writer, which then waits to take it back).
                if wait >= SHORTEST_NAP {
                    std::thread::sleep(std::time::Duration::from_secs_f64(wait));
                } else {
                    while began.elapsed().as_secs_f64() < wait {
                        std::hint::spin_loop();
                    }
                }
            }
            text
        })
    }

    fn summarize(
        &self,
        r: &mut Reader,
        built: &Built,
        probes: &[Probe],
        inst: &dyn Installed,
    ) -> Value {
        let mut v = self.with_sides(built, inst, |sides| {
            let tail = r.drain(sides, true);
            r.finish(sides, probes, tail)
        });
        // The kernel's probes out, with the process's still in (they go out after this).
        if let Some(k) = self.kernel.borrow_mut().take() {
            v["kernel_points"] = json!(k.probes.len());
            if let Err(e) = k.inst.remove() {
                v["kernel_restore_error"] = json!(e.to_string());
                *self.output_error.borrow_mut() = Some(format!("restoring the kernel: {e}"));
            }
        }
        if let Some(e) = v["output_error"].as_str() {
            *self.output_error.borrow_mut() = Some(e.to_string());
        }
        v
    }

    fn final_table(&self, summary: &Value) -> String {
        let mut t = String::new();
        if let Some(s) = summary["live_tail"].as_str() {
            t.push_str(s);
        }
        if let Some(r) = summary["output_report"].as_str() {
            t.push_str(&format!("{r}\n"));
        }
        t.push_str(&format!(
            "{:>12} {:>12} {:>12} {:>12}  stream\n",
            "emitted", "filtered", "delivered", "lost"
        ));
        for s in summary["streams"].as_array().into_iter().flatten() {
            t.push_str(&format!(
                "{:>12} {:>12} {:>12} {:>12}  {}\n",
                s["emitted"].as_u64().unwrap_or(0),
                s["filtered"].as_u64().unwrap_or(0),
                s["delivered"].as_u64().unwrap_or(0),
                s["lost"].as_u64().unwrap_or(0),
                s["name"].as_str().unwrap_or("?"),
            ));
        }
        let sum = |key: &str| -> u64 {
            (summary["streams"].as_array().into_iter().flatten())
                .map(|s| s[key].as_u64().unwrap_or(0))
                .sum()
        };
        let no_ring = sum("lost_no_ring");
        let full = sum("lost").saturating_sub(no_ring);
        if let (true, Some(slots)) = (full > 0, self.slots_used.get()) {
            let most = match self.kernel_target {
                Some(_) => "as many as the driver's heap holds".to_string(),
                None => format!("up to {}", max_thread_slots()),
            };
            t.push_str(&format!(
                "{full} events lost to full rings: rings of {slots} slots filled before kerf's \
                 reader emptied them (a flood, or a reader short of CPU); --ring-slots gives \
                 each more room (a power of two, {most})\n"
            ));
            // Decoding as it drains (about a microsecond an event) is what a flood outruns,
            // whatever the rings' size.
            if summary["packed"] == false {
                t.push_str(
                    "(this output is decoded while kerf drains the rings; a raw trace, -o \
                     FILE.kerf-trace then kerf trace convert, copies them as they are and keeps \
                     up with far higher rates)\n",
                );
            }
        }
        if no_ring > 0 {
            t.push_str(&format!(
                "{no_ring} events lost by threads that found no ring (a process's 256 rings a \
                 stream were all held by live threads)\n"
            ));
        }
        t
    }
}

/// A hint that the shared word at byte `offset` is read soon (see `ring::copy_ahead`).
pub(crate) fn prefetch(shared: &[std::sync::atomic::AtomicU64], offset: u64) {
    if let Some(w) = shared.get((offset / 8) as usize) {
        // The slot's first line: header and five words, all most records have.
        let p = w.as_ptr().cast::<i8>().cast_const();
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint: it never faults (not even on an unmapped address) and
        // changes no memory; SSE, which it needs, is part of every x86-64 CPU.
        unsafe { _mm_prefetch::<{ _MM_HINT_T0 }>(p) };
    }
}

/// Hands the cache line at byte `offset` of the shared words back to memory, out of this
/// CPU's caches (`clflushopt`, else `clflush`): for ring lines the reader has taken, which the
/// writer's CPU would otherwise have to take back from this one before its next store there
/// (see `ring::read_lines`).
pub(crate) fn evict(shared: &[std::sync::atomic::AtomicU64], offset: u64) {
    if let Some(w) = shared.get((offset / 8) as usize) {
        let p = w.as_ptr().cast::<u8>().cast_const();
        if has_clflushopt() {
            // SAFETY: a flush changes no memory (a dirty line is written back first) and `p`
            // lies in the mapping `shared` borrows; the CPU has `clflushopt` (CPUID).
            unsafe {
                std::arch::asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags))
            };
        } else {
            // SAFETY: as above; `clflush` is part of every x86-64 CPU (SSE2).
            unsafe { std::arch::x86_64::_mm_clflush(p) };
        }
    }
}

/// Whether the CPU has `clflushopt` (CPUID leaf 7, EBX bit 23), which unlike `clflush` is not
/// ordered against other flushes: a reader giving back a run of lines does not wait for each.
fn has_clflushopt() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        let max = std::arch::x86_64::__cpuid(0).eax;
        max >= 7 && std::arch::x86_64::__cpuid_count(7, 0).ebx & (1 << 23) != 0
    })
}

/// One traced target as the reader sees it: its probes' tables and what is in (a process's
/// probes are handed in by the live tool's loop; the kernel's, in a trace of both, are the
/// tracer's own).
pub struct Side<'a> {
    pub built: &'a Built,
    pub inst: &'a dyn Installed,
}

/// One ring as the reader last saw it.
#[derive(Clone, Copy)]
struct RingSeen {
    /// Whether it was ever written.
    used: bool,
    /// Its writers, for the drain's cut.
    watch: RingWatch,
    /// Its thread's owner word (packed output names a thread when its ring gets a new owner).
    owner: u64,
}

/// What the reader keeps per source.
struct SourceState {
    pid: u32,
    /// Per stream: events delivered, and the time of the last one.
    delivered: Vec<u64>,
    last_ns: Vec<u64>,
    /// Losses seen so far, per (stream, heap, ring) (`NO_SLOT_KEY`: no slot).
    lost_seen: HashMap<(usize, usize, u64), u64>,
}

/// The reader: what it has drained so far, per source, stream and ring.
pub struct Reader {
    output: Output,
    tables: Tables,
    summary: Summary,
    /// TSC to CLOCK_MONOTONIC, calibrated over the installation.
    clock: Clock,
    /// Per source (its id is the index).
    sources: Vec<SourceState>,
    /// Threads already named, per source, and the last one looked up (most events come in
    /// runs of one thread's).
    named: HashSet<(u16, u32)>,
    last_named: (u16, u32),
    /// The largest share of its slots one ring held in the last drain, and the most bytes of
    /// records; when the drain before began.
    fullest: (f64, f64),
    drained_at: Option<std::time::Instant>,
    /// When the reader was made, and what the drains of its warm-up found, summed (see
    /// `render`): the shares of their fullest rings and the bytes; taken when it ends.
    made: std::time::Instant,
    warm_sum: Option<(f64, f64)>,
    /// The fastest a ring filled lately, in shares of its slots a second and in bytes a
    /// second (see `render`).
    peak_fill_rate: f64,
    peak_byte_rate: f64,
    /// Per (source, stream, heap), each ring as the reader last saw it; when all were last
    /// looked at, and the TSC then.
    rings: HashMap<(usize, usize, usize), Vec<RingSeen>>,
    full_pass_at: Option<std::time::Instant>,
    full_pass_tsc: u64,
    /// The TSC before the probes went in: no ring had a record then.
    start_tsc: u64,
    /// Packed records of the drain going on, and those held back from the last (decoded
    /// outputs).
    unpacker: Unpacker,
    /// The words of one ring's records, reused.
    words: Vec<u64>,
    /// Packed output: the first error writing it, and when threads were last named.
    packed_error: Option<String>,
    named_at: Option<std::time::Instant>,
    /// When thread table slots of ended forked children were last looked for.
    freed_at: Option<std::time::Instant>,
    /// Text of the live view not yet handed out.
    live: Vec<u8>,
    /// The control file, the lines of it applied so far, and when it was last read.
    control: Option<(std::path::PathBuf, usize, std::time::Instant)>,
}

impl Reader {
    fn new(start: (u64, u64), sides: &[Side<'_>], output: Output) -> Reader {
        // The calibration spans the installation; a very quick one is stretched to 20 ms.
        let mut end = kerf_os::clock::tsc_and_monotonic();
        if end.1 < start.1 + 20_000_000 {
            std::thread::sleep(std::time::Duration::from_nanos(start.1 + 20_000_000 - end.1));
            end = kerf_os::clock::tsc_and_monotonic();
        }
        let ticks_per_ns = (end.0 - start.0) as f64 / (end.1 - start.1).max(1) as f64;
        let realtime = kerf_os::clock::realtime_ns() as i64 - kerf_os::clock::monotonic_ns() as i64;
        let clock = Clock { ticks_per_ns, anchor_tsc: end.0, anchor_ns: end.1 };
        let mut r = Reader {
            output,
            tables: Tables::default(),
            summary: Summary::default(),
            clock,
            sources: Vec::new(),
            named: HashSet::new(),
            last_named: (u16::MAX, 0),
            fullest: (0.0, 0.0),
            drained_at: None,
            made: std::time::Instant::now(),
            warm_sum: Some((0.0, 0.0)),
            peak_fill_rate: 0.0,
            peak_byte_rate: 0.0,
            rings: HashMap::new(),
            full_pass_at: None,
            full_pass_tsc: start.0,
            start_tsc: start.0,
            unpacker: Unpacker::default(),
            words: Vec::new(),
            packed_error: None,
            named_at: None,
            freed_at: None,
            live: Vec::new(),
            control: None,
        };
        if let Output::Packed(Some(w)) = &mut r.output {
            if let Err(e) = w.clock(&clock) {
                r.packed_error = Some(e.to_string());
            }
        }
        for (id, side) in sides.iter().enumerate() {
            let (pid, name) = match side.inst.target() {
                kerf_session::probe::Where::Kernel => (0, "kernel".to_string()),
                kerf_session::probe::Where::Process(p) => {
                    let comm =
                        std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
                    (p as u32, comm.trim().to_string())
                }
            };
            let kind = if pid == 0 { SourceKind::Kernel } else { SourceKind::Process };
            let n = side.built.streams.len();
            r.sources.push(SourceState {
                pid,
                delivered: vec![0; n],
                last_ns: vec![0; n],
                lost_seen: HashMap::new(),
            });
            r.put(Record::Source(Source {
                id: id as u16,
                machine: String::new(),
                kind,
                pid,
                name,
                realtime_offset_ns: realtime,
                probes: side.built.probes.clone(),
                streams: side.built.streams.clone(),
            }));
            let built = side.built;
            let d = SourceDecode {
                pid,
                probes: (built.probes.iter().zip(&built.decode))
                    .map(|(p, d)| (p.kind, p.stream, d.clone()))
                    .collect(),
            };
            if let Output::Packed(Some(w)) = &mut r.output {
                if let Err(e) = w.decode_table(id as u16, &d) {
                    r.packed_error.get_or_insert(e.to_string());
                }
            }
            r.unpacker.source(id as u16, d);
        }
        r.room_for_drains(sides);
        r
    }

    /// Room, with its pages written once now, for the largest drain of one ring: the copied
    /// words, and for a raw file the encoded record. Grown during the trace instead, these
    /// buffers took fresh pages (a fault and a zeroed page each 4 KiB) and a copy exactly
    /// when the reader was furthest behind: after a start or a stall, at 100-230 ns a record
    /// instead of 25-30.
    fn room_for_drains(&mut self, sides: &[Side<'_>]) {
        let most = sides
            .iter()
            .flat_map(|side| {
                let area = &side.built.area;
                (0..area.streams()).map(move |s| area.shape(s))
            })
            .map(|shape| shape.slots as usize * (2 + shape.max_values()))
            .max()
            .unwrap_or(0);
        self.words.reserve(most);
        self.words.resize(most, 0);
        self.words.clear();
        if let Output::Packed(Some(w)) = &mut self.output {
            w.room_for(most);
        }
    }

    /// CLOCK_MONOTONIC ns of a TSC reading.
    fn ns(&self, tsc: u64) -> u64 {
        self.clock.ns(tsc)
    }

    fn put(&mut self, r: Record) {
        self.tables.note(&r);
        self.summary.count(&r);
        let res = match &mut self.output {
            Output::Live => {
                let mut text = super::text::Text::new(&mut self.live);
                text.record(&self.tables, &r)
            }
            Output::Sink(s) => s.record(&self.tables, &r),
            // The end record is the writer's to write, when it finishes.
            Output::Packed(Some(w)) if r != Record::End => {
                w.write(&r).map_err(|e| std::io::Error::other(e.to_string()))
            }
            Output::Packed(_) => Ok(()),
        };
        // A full disk or a closed pipe ends nothing: the target must still be restored.
        if let (Err(e), Output::Packed(_)) = (res, &self.output) {
            self.packed_error.get_or_insert(e.to_string());
        }
    }

    /// Drain every ring of every source once: records in one time order to the output,
    /// losses as they are seen. `last`: the probes are about to go out; records reserved and
    /// never completed (their thread died mid-record) are counted lost. Returns the live
    /// view's new text.
    fn drain(&mut self, sides: &[Side<'_>], last: bool) -> String {
        for side in sides {
            self.apply_control(side.built, side.inst);
        }
        // The TSC before any ring is read: records stamped later wait for the next drain. The
        // cut goes earlier for records reserved and not complete (see `unpack`), and for the
        // rings not read in this drain, to the last full pass.
        let began = kerf_os::clock::tsc_before_loads();
        let now = self.ns(began);
        let patience = (self.clock.ticks_per_ns * PENDING_PATIENCE_NS) as u64;
        let mut words = std::mem::take(&mut self.words);
        // Every ring's header is read at least every FULL_PASS (and at the last drain), the
        // rings in use at every drain.
        let full = last || self.full_pass_at.is_none_or(|t| t.elapsed() >= FULL_PASS);
        if full {
            self.full_pass_at = Some(std::time::Instant::now());
            self.full_pass_tsc = began;
        }
        let mut cut = began.min(self.full_pass_tsc);
        let mut fullest = (0.0f64, 0.0f64);
        for (src, side) in sides.iter().enumerate() {
            let (built, inst) = (side.built, side.inst);
            let area = &built.area;
            for s in 0..built.streams.len() {
                let shape = area.shape(s as u32);
                for h in inst.areas() {
                    let base = area.rings(s as u32);
                    // Straight loads from the shared words (Acquire: the ring's protocol
                    // reads seq before the record's words, which x86 keeps in order). Kept
                    // inline here: the same load through a small shared function (with
                    // `free_ended_children`'s) lost 3-500 k of 60 M events at 20 M/s where
                    // this lost none (4 runs each, interleaved, session 23).
                    let Some(shared) = inst.ring_words(h) else { continue };
                    let word = |o: u64| {
                        let i = ((base + o) / 8) as usize;
                        shared.get(i).map_or(0, |w| w.load(std::sync::atomic::Ordering::Acquire))
                    };
                    self.loss(src, s, (h, NO_SLOT_KEY), word(ring::NO_SLOT), now);
                    let mut rings = self.rings.remove(&(src, s, h)).unwrap_or_default();
                    let start =
                        RingSeen { used: false, watch: RingWatch::new(self.start_tsc), owner: 0 };
                    rings.resize(area.per.count() as usize, start);
                    for k in 0..area.per.count() {
                        // Ring k of the area, a thread's or a CPU's: between full passes, only
                        // rings ever written (their headers are cache lines to fetch too).
                        let RingSeen { used, watch, owner } = &mut rings[k as usize];
                        if !full && !*used {
                            continue;
                        }
                        let ring_at = ring::thread_ring(k, shape);
                        if !*used {
                            let at = ring_at + ring::HEAD;
                            *used = word(at) != 0 || word(ring_at + ring::LOST) != 0;
                            if !*used {
                                watch.read(began, 0, 0, patience);
                                continue;
                            }
                        }
                        words.clear();
                        let c = ring::copy_ahead(
                            &|o| word(ring_at + o),
                            &|o| prefetch(shared, base + ring_at + o),
                            shape,
                            &mut words,
                        );
                        if c.records > 0 {
                            for line in ring::read_lines(shape, c.tail - c.records, c.tail) {
                                evict(shared, base + ring_at + line);
                            }
                            inst.ring_store(h, base + ring_at + ring::TAIL, c.tail);
                        }
                        if let Some(after) = watch.read(began, c.tail, c.tail + c.pending, patience)
                        {
                            cut = cut.min(after);
                        }
                        // A thread ring's owner (a process's: per-CPU rings have none): a
                        // forked child's thread is of another process, which its events must
                        // name. Packed output decodes nothing while tracing: a thread is
                        // named when its ring gets it as owner, while it lives (/proc is read
                        // every 100 ms too, where thread ids are not known), and its process
                        // with it.
                        let pid = self.sources[src].pid;
                        let now_owner = if pid != 0 { inst.thread_owner(h, k) } else { 0 };
                        if now_owner != *owner {
                            *owner = now_owner;
                            let (tid, of) = (now_owner as u32, (now_owner >> 32) as u32);
                            let of = if of == 0 { pid } else { of };
                            if tid != 0 {
                                self.unpacker.thread_pid(src as u16, tid, of);
                                // Named again even if /proc's poll named it: that may have
                                // been before the thread named itself.
                                if matches!(self.output, Output::Packed(_)) {
                                    self.named.insert((src as u16, tid));
                                    // A child's thread gone already (its name unknown) still
                                    // gets a record: it tells `convert` the child's process.
                                    if !self.name_thread(src as u16, of, tid) && of != pid {
                                        let source = src as u16;
                                        let name = String::new();
                                        self.put(Record::Thread(ThreadInfo {
                                            source,
                                            pid: of,
                                            tid,
                                            name,
                                        }));
                                    }
                                }
                            }
                        }
                        let lost = c.lost + if last { c.pending } else { 0 };
                        self.loss(src, s, (h, k), lost, now);
                        if c.records == 0 {
                            continue;
                        }
                        let share = c.records as f64 / f64::from(area.slots.max(1));
                        let bytes = c.records as f64 * f64::from(shape.slot_len);
                        fullest = (fullest.0.max(share), fullest.1.max(bytes));
                        let st = &mut self.sources[src];
                        st.delivered[s] += c.records;
                        st.last_ns[s] = self.clock.ns(c.last_time);
                        match &mut self.output {
                            Output::Packed(Some(w)) => {
                                self.summary.events += c.records;
                                if let Err(e) = w.packed(src as u16, &words) {
                                    self.packed_error.get_or_insert(e.to_string());
                                }
                            }
                            // Records of probes the tables have (always: kerf built both).
                            _ => {
                                let _ = self.unpacker.add(src as u16, &words);
                            }
                        }
                    }
                    self.rings.insert((src, s, h), rings);
                }
            }
        }
        self.words = words;
        self.fullest = fullest;
        if !last && self.freed_at.is_none_or(|t| t.elapsed() >= FREE_SLOTS_EVERY) {
            self.freed_at = Some(std::time::Instant::now());
            free_ended_children(sides, &self.sources);
        }
        if let Output::Packed(w) = &mut self.output {
            // Convert orders the records; the threads' names come from /proc now and then.
            if let (Some(w), false) = (w.as_mut(), last) {
                if let Err(e) = w.drain(cut) {
                    self.packed_error.get_or_insert(e.to_string());
                }
            }
            if last || self.named_at.is_none_or(|t| t.elapsed().as_millis() >= 100) {
                self.named_at = Some(std::time::Instant::now());
                self.name_new_threads(sides);
            }
            return String::new();
        }
        // One time order over this drain's records and those held back by the last (see
        // `unpack`); the last drain holds nothing back.
        let mut events = Vec::with_capacity(self.unpacker.waiting());
        let clock = self.clock;
        self.unpacker.drain((!last).then_some(cut), &clock, |e| events.push(e));
        for e in events {
            let who = (e.source, e.tid);
            if e.tid != 0 && e.pid != 0 && who != self.last_named {
                self.last_named = who;
                if self.named.insert(who) {
                    self.name_thread(e.source, e.pid, e.tid);
                }
            }
            self.put(Record::Event(e));
        }
        String::from_utf8_lossy(&std::mem::take(&mut self.live)).into_owned()
    }

    /// Apply the control file's new lines (read every 100 ms at most): `on NAME` and `off
    /// NAME` set the stream's flag in every area, which the generated code reads at once.
    fn apply_control(&mut self, built: &Built, inst: &dyn Installed) {
        let Some((path, applied, at)) = &mut self.control else { return };
        if at.elapsed() < std::time::Duration::from_millis(100) {
            return;
        }
        *at = std::time::Instant::now();
        let Ok(text) = std::fs::read_to_string(&*path) else { return };
        // Only whole lines: a writer may be half-way through the last one.
        let lines: Vec<&str> = text.split_inclusive('\n').filter(|l| l.ends_with('\n')).collect();
        let mut said = Vec::new();
        for line in lines.iter().skip(*applied) {
            let mut w = line.split_whitespace();
            let (verb, name) = (w.next(), w.next());
            let on = match verb {
                Some("on") => 1,
                Some("off") => 0,
                _ => {
                    said.push(format!("# control: ignored '{}'", line.trim()));
                    continue;
                }
            };
            match built.streams.iter().position(|s| Some(s.name.as_str()) == name) {
                Some(s) => {
                    for h in inst.areas() {
                        inst.area_store(h, built.area.flag(s as u32), on);
                    }
                    said.push(format!(
                        "# stream {} {}",
                        name.unwrap_or(""),
                        if on == 1 { "on" } else { "off" }
                    ));
                }
                None => said.push(format!("# control: no stream '{}'", name.unwrap_or(""))),
            }
        }
        *applied = lines.len();
        if matches!(self.output, Output::Live) {
            for s in said {
                self.live.extend_from_slice(s.as_bytes());
                self.live.push(b'\n');
            }
        }
    }

    /// A ring's loss count is `total` now: the growth since the last drain is a loss record.
    fn loss(&mut self, src: usize, s: usize, ring: (usize, u64), total: u64, now: u64) {
        // Most rings never lose: no lookup for them (this runs for every ring at every drain).
        if total == 0 {
            return;
        }
        let st = &mut self.sources[src];
        let seen = st.lost_seen.entry((s, ring.0, ring.1)).or_insert(0);
        if total <= *seen {
            return;
        }
        let count = total - *seen;
        *seen = total;
        let from_ns = st.last_ns[s];
        self.put(Record::Loss(Loss {
            source: src as u16,
            stream: s as u16,
            count,
            from_ns,
            to_ns: now,
            origin: LossOrigin::Ring,
        }));
    }

    /// Packed output: a thread record for each thread of a traced process not named yet
    /// (the events are not decoded here, so their threads are found in /proc instead).
    fn name_new_threads(&mut self, sides: &[Side<'_>]) {
        for src in 0..sides.len() {
            let pid = self.sources[src].pid;
            if pid == 0 {
                continue;
            }
            let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
            for tid in dir.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()) {
                if self.named.insert((src as u16, tid)) {
                    self.name_thread(src as u16, pid, tid);
                }
            }
        }
    }

    /// Name thread `tid` of source `source` (process `pid`) from /proc; a forked child's
    /// thread, not in `pid`'s task list, by its own id. Whether it could (the thread lives).
    fn name_thread(&mut self, source: u16, pid: u32, tid: u32) -> bool {
        let name = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
            .or_else(|_| std::fs::read_to_string(format!("/proc/{tid}/comm")));
        let Ok(name) = name else { return false };
        self.put(Record::Thread(ThreadInfo { source, pid, tid, name: name.trim().to_string() }));
        true
    }

    /// The streams' final counters (to the output too) and the summary.
    fn finish(&mut self, sides: &[Side<'_>], probes: &[Probe], tail: String) -> Value {
        let now = self.ns(kerf_os::clock::tsc());
        let mut streams = Vec::new();
        for (src, side) in sides.iter().enumerate() {
            let (built, inst) = (side.built, side.inst);
            for (s, info) in built.streams.iter().enumerate() {
                let filtered: u64 = inst
                    .areas()
                    .iter()
                    .map(|&h| inst.area_load(h, built.area.filtered(s as u32)))
                    .sum();
                let st = &self.sources[src];
                let lost: u64 =
                    (st.lost_seen.iter()).filter(|((x, _, _), _)| *x == s).map(|(_, v)| *v).sum();
                let no_ring: u64 = (st.lost_seen.iter())
                    .filter(|((x, _, r), _)| *x == s && *r == NO_SLOT_KEY)
                    .map(|(_, v)| *v)
                    .sum();
                let delivered = st.delivered[s];
                let c = Counters {
                    source: src as u16,
                    stream: s as u16,
                    time_ns: now,
                    emitted: filtered + delivered + lost,
                    filtered,
                    delivered,
                    lost,
                };
                let name =
                    if src == 0 { info.name.clone() } else { format!("{} (kernel)", info.name) };
                streams.push(json!({"name": name, "emitted": c.emitted, "filtered": filtered,
                    "delivered": delivered, "lost": lost, "lost_no_ring": no_ring}));
                self.put(Record::Counters(c));
            }
        }
        self.put(Record::End);
        let mut tail = tail;
        tail.push_str(&String::from_utf8_lossy(&std::mem::take(&mut self.live)));
        let summary = self.summary.clone();
        let (mut output_error, mut output_report) = (None, None);
        let packed = matches!(self.output, Output::Packed(_));
        match &mut self.output {
            Output::Sink(s) => {
                output_error = s.finish(&self.tables, &summary).err().map(|e| e.to_string());
                output_report = s.report();
            }
            Output::Packed(w) => {
                if let Some(Err(e)) = w.take().map(|w| w.finish()) {
                    self.packed_error.get_or_insert(e.to_string());
                }
                output_error = self.packed_error.clone();
            }
            Output::Live => {}
        }
        let inst = sides[0].inst;
        let points: Vec<Value> = probes
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let mut v = site_json(inst.site(i)?);
                v["spec"] = json!(p.point.spec);
                Some(v)
            })
            .collect();
        json!({"events": summary.events, "lost": summary.lost, "streams": streams,
               "points": points, "live_tail": tail,
               "output_error": output_error, "output_report": output_report,
               "packed": packed,
               "tsc_ticks_per_ns": self.clock.ticks_per_ns})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_point_names_the_function_it_found() {
        assert_eq!(
            glob_point("libsqlite3:sqlite3_*", "sqlite3_step").as_deref(),
            Some("libsqlite3:sqlite3_step")
        );
        assert_eq!(glob_point("*open*@exits", "open64").as_deref(), Some("open64@exits"));
        assert_eq!(glob_point("libc:open", "open"), None);
        assert_eq!(glob_point("vfs_read+0x3c", "vfs_read"), None);
    }

    /// `--ring-slots` offers no size the IR then refuses (32768 was offered once, when 256
    /// rings of it and their headers passed the bound of the time).
    #[test]
    fn the_largest_ring_slots_offered_fit_the_ir_bound() {
        let max = max_thread_slots() as u32;
        assert!(ring::thread_rings_len(ring::Shape::long(max)) <= ir::MAX_THREAD_RINGS_LEN);
        assert!(ring::thread_rings_len(ring::Shape::long(2 * max)) > ir::MAX_THREAD_RINGS_LEN);
        assert_eq!(max, 1 << 18);
        let new = |slots| {
            Trace::new(&["f {arg0}".into()], false, Some(slots), vec![], None, Output::Live)
        };
        assert!(new(max).is_ok());
        match new(2 * max) {
            Err(e) => assert!(e.to_string().contains("from 2 to 262144"), "{e}"),
            Ok(_) => panic!("--ring-slots {} taken", 2 * max),
        }
    }
}
