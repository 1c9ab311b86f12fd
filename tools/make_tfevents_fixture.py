#!/usr/bin/env python3
"""make_tfevents_fixture.py — a TensorBoard event file written by TensorBoard's own writer, for
tests/test_tfevents.c, which writes the same events with grpo's writer (core/io/tfevents.c) and
compares the bytes; and, given a grpo run's log.dir, a check that TensorBoard's own reader loads
what grpo wrote.

  python3 tools/make_tfevents_fixture.py                 writes tests/fixtures/tensorboard/
                                                         events.bin and events_resume.bin
  python3 tools/make_tfevents_fixture.py --read LOG_DIR  prints the scalars and texts TensorBoard
                                                         reads from LOG_DIR's event file(s)

The events (wall time 1700000000.5): the file-version event; at step 3 the scalars reward = 0.5
and kl = 0.0125 in one summary; at step 3 a text summary "completions" holding "a\\n| b |".
Needs: pip install tensorboard.
"""
import argparse
import os

from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
from tensorboard.summary.writer.record_writer import RecordWriter

WALL = 1700000000.5


def events():
    yield event_pb2.Event(wall_time=WALL, file_version="brain.Event:2")
    s = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="reward", simple_value=0.5),
                                   summary_pb2.Summary.Value(tag="kl", simple_value=0.0125)])
    yield event_pb2.Event(wall_time=WALL, step=3, summary=s)
    md = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
    t = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=["a\n| b |".encode()])
    t.tensor_shape.SetInParent()
    s = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="completions", metadata=md,
                                                             tensor=t)])
    yield event_pb2.Event(wall_time=WALL, step=3, summary=s)


def resumed_events():
    """What a run resumed at step 5 starts its new file with: TensorBoard drops the older files'
    events from step 5 on when it sees the SessionLog START."""
    yield event_pb2.Event(wall_time=WALL, file_version="brain.Event:2")
    yield event_pb2.Event(wall_time=WALL, step=5,
                          session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))


def write(path, evs):
    with open(path, "wb") as f:
        w = RecordWriter(f)
        for e in evs:
            w.write(e.SerializeToString())
        w.flush()


def read(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(log_dir, size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    tags = acc.Tags()
    for tag in tags["scalars"]:
        print("scalar", tag, [(e.step, e.value) for e in acc.Scalars(tag)])
    for tag in tags["tensors"]:
        print("tensor", tag, [(e.step, e.tensor_proto.string_val[:1]) for e in acc.Tensors(tag)][:2])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--read")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "tests", "fixtures", "tensorboard", "events.bin"))
    a = ap.parse_args()
    if a.read:
        read(a.read)
    else:
        write(a.out, events())
        write(os.path.join(os.path.dirname(a.out), "events_resume.bin"), resumed_events())


if __name__ == "__main__":
    main()
