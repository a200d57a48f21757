#!/usr/bin/env python3
"""Reads a .perfetto-trace with Perfetto's own proto schema (the `perfetto` PyPI package's
perfetto_trace_pb2, with the `protobuf` package) and prints what a trace processor would make of
its track events as JSON: process and thread tracks, slices rebuilt from BEGIN/END per track
(with depth, duration and the arguments of both ends), instants and counter values.
Used by crates/tools/tests/trace_output.rs; exits 2 with what to install if the packages are
missing, 1 if the file breaks a rule the trace processor relies on."""
import json
import sys

try:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
except ImportError as e:
    print(f"perfetto_check: {e}: pip install perfetto==0.59.1 protobuf==7.36.2 "
          "(scripts/deps.sh does)", file=sys.stderr)
    sys.exit(2)


def value(a):
    kind = a.WhichOneof("value")
    if kind is None:
        raise SystemExit(f"annotation {a.name} has no value")
    return getattr(a, kind)


def main(path):
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    tracks, events = {}, []
    for i, p in enumerate(trace.packet):
        if p.trusted_packet_sequence_id == 0:
            raise SystemExit(f"packet {i} has no sequence id")
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            t = {"uuid": d.uuid, "name": d.name}
            if d.HasField("process"):
                t.update(kind="process", pid=d.process.pid, process_name=d.process.process_name)
            elif d.HasField("thread"):
                t.update(kind="thread", pid=d.thread.pid, tid=d.thread.tid,
                         thread_name=d.thread.thread_name, parent=d.parent_uuid)
            elif d.HasField("counter"):
                t.update(kind="counter")
            else:
                t.update(kind="plain")
            tracks[d.uuid] = t
        elif p.HasField("track_event"):
            e = p.track_event
            if e.track_uuid not in tracks:
                raise SystemExit(f"packet {i}: event on track {e.track_uuid} not described before")
            events.append((p.timestamp, i, e))
    events.sort(key=lambda x: (x[0], x[1]))
    slices, instants, counters, stacks = [], [], [], {}
    for ts, _, e in events:
        t = tracks[e.track_uuid]
        args = {a.name: value(a) for a in e.debug_annotations}
        where = ({"pid": t["pid"], "tid": t["tid"]} if t["kind"] == "thread"
                 else {"track": t["name"]})
        stack = stacks.setdefault(e.track_uuid, [])
        if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            s = dict(where, name=e.name, ts=ts, dur=None, depth=len(stack), args=args)
            stack.append(s)
            slices.append(s)
        elif e.type == pb.TrackEvent.TYPE_SLICE_END:
            if not stack:
                raise SystemExit(f"END at {ts} on {where} with no open slice")
            s = stack.pop()
            s["dur"] = ts - s["ts"]
            s["args"].update(args)
        elif e.type == pb.TrackEvent.TYPE_INSTANT:
            instants.append(dict(where, name=e.name, ts=ts, depth=len(stack), args=args))
        elif e.type == pb.TrackEvent.TYPE_COUNTER:
            counters.append({"track": t["name"], "ts": ts, "value": e.counter_value})
    processes = {str(t["pid"]): t["process_name"] for t in tracks.values() if t["kind"] == "process"}
    threads = {str(t["tid"]): {"pid": t["pid"], "name": t["thread_name"],
                               "in_process": tracks.get(t["parent"], {}).get("pid")}
               for t in tracks.values() if t["kind"] == "thread"}
    json.dump({"processes": processes, "threads": threads, "slices": slices,
               "instants": instants, "counters": counters,
               "tracks": sorted(t["name"] for t in tracks.values() if t["name"])},
              sys.stdout, sort_keys=True, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
