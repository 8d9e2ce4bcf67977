"""bert_runner.engines.device_feed: the JAX loop's input. Batches come in order, placed, never
more taken than allowed (the checkpointed input position is the trained steps'), the input's
errors and its end reach the consumer, and closing stops the thread."""
import threading

import numpy as np
import pytest

from bert_runner.engines.device_feed import DeviceFeed


def _source(count):
    """`next_batch` over `count` batches, and the list of those it gave."""
    numbers, taken = iter(range(count)), []

    def next_batch():
        value = next(numbers)
        taken.append(value)
        return {"x": np.full((2,), value)}

    return next_batch, taken


def _placed(batch):
    return {name: ("placed", value) for name, value in batch.items()}


def _value(batch):
    tag, array = batch["x"]
    assert tag == "placed"
    return int(array[0])


def test_batches_come_in_order_and_none_is_taken_beyond_the_allowance():
    next_batch, taken = _source(10)
    with DeviceFeed(next_batch, _placed, depth=2) as feed:
        feed.allow_through(3)
        assert [_value(feed.next()) for _ in range(3)] == [0, 1, 2]
        assert taken == [0, 1, 2]
        with pytest.raises(RuntimeError, match="beyond the batches allowed"):
            feed.next()
        feed.allow_through(2)  # an allowance is a total: nothing more
        feed.allow_through(5)
        assert [_value(feed.next()) for _ in range(2)] == [3, 4]
    assert taken == [0, 1, 2, 3, 4]


def test_the_thread_keeps_at_most_depth_batches_ahead():
    gate = threading.Semaphore(0)
    next_batch, taken = _source(10)

    def watched():
        gate.release()
        return next_batch()

    with DeviceFeed(watched, _placed, depth=2) as feed:
        feed.allow_through(10)
        assert _value(feed.next()) == 0
        for _ in range(4):  # the one handed over, two queued, one waiting to be queued
            assert gate.acquire(timeout=10)
        assert not gate.acquire(timeout=0.3)
        assert taken == [0, 1, 2, 3]


def test_the_inputs_end_and_errors_reach_the_consumer_in_order():
    next_batch, _ = _source(2)
    with DeviceFeed(next_batch, _placed) as feed:
        feed.allow_through(5)
        assert [_value(feed.next()) for _ in range(2)] == [0, 1]
        with pytest.raises(StopIteration):
            feed.next()

    def broken(batch):
        raise ValueError("cannot place")

    with DeviceFeed(_source(3)[0], broken) as feed:
        feed.allow_through(3)
        with pytest.raises(ValueError, match="cannot place"):
            feed.next()
        with pytest.raises(RuntimeError, match="after close"):
            feed.next()


def test_close_stops_the_thread_with_batches_still_allowed():
    feed = DeviceFeed(_source(100)[0], _placed, depth=1)
    feed.allow_through(100)
    feed.next()
    feed.close()
    assert not feed._thread.is_alive()
