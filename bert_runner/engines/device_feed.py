"""Host batches onto the devices ahead of the step: the JAX training loop's input, with no
TensorFlow (the trainer hands it `tf.data`'s batches as numpy arrays; the accelerator bench its
own).

    feed = DeviceFeed(next_batch, place)      # next_batch() -> {name: np.ndarray}
    feed.allow_through(steps)                 # it may take that many batches in all
    for _ in range(steps):
        state, metrics = step(state, feed.next())
    feed.close()

A thread of its own takes the host batches and places them (`jax.device_put`, asynchronous):
`depth` of them queued ahead of the step, and one more placed while the queue is full. The
device never waits for the host to read, convert or copy the next batch while a step runs. It
never takes more batches than it is allowed: the trainer allows the steps up to its next
checkpoint, so the input position a checkpoint saves is the one the trained steps reached, and
a resumed run reads the batches an uninterrupted one would.
"""
import queue
import threading


class DeviceFeed:
    """Batches of `next_batch()` placed by `place`, `depth` of them queued ahead, in a thread.

    Args:
        next_batch: `() -> {name: np.ndarray}`, the next global batch on the host (raises
            StopIteration at the end of the input).
        place: `{name: array} -> {name: jax.Array}`, the batch on the devices as the step takes
            it (`JaxStep.place`), called on the feed's thread.
        depth: batches queued ahead of the one the step is given (2: one in flight while
            another waits, as Keras' own JAX trainer keeps them).
    """

    def __init__(self, next_batch, place, depth=2):
        self._next_batch = next_batch
        self._place = place
        self._ready = queue.Queue(maxsize=depth)
        # Batches the thread may take in all; it has taken `_taken`, `next` handed `_given`.
        self._allowed = self._taken = self._given = 0
        self._condition = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._fill, name="DeviceFeed", daemon=True)
        self._thread.start()

    def allow_through(self, count):
        """Lets the feed take up to `count` batches from `next_batch` in all (since it was
        made)."""
        with self._condition:
            self._allowed = max(self._allowed, count)
            self._condition.notify()

    def next(self):
        """The next placed batch; re-raises what `next_batch` or `place` raised (StopIteration
        at the input's end)."""
        if self._closed:
            raise RuntimeError("DeviceFeed.next after close")
        with self._condition:
            if self._given == self._allowed:
                raise RuntimeError("DeviceFeed.next beyond the batches allowed")
            self._given += 1
        item = self._ready.get()
        if isinstance(item, BaseException):
            self.close()
            raise item
        return item

    def close(self):
        """Stops the thread (the batches it took and did not hand over are dropped) and waits
        for it to return from the batch it may be reading."""
        with self._condition:
            self._closed = True
            self._condition.notify()
        self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def _fill(self):
        while True:
            with self._condition:
                while self._taken == self._allowed and not self._closed:
                    self._condition.wait()
                if self._closed:
                    return
                self._taken += 1
            try:
                item = self._place(self._next_batch())
            except BaseException as error:  # noqa: BLE001 - handed to the consumer, in order
                item = error
            self._put(item)
            if isinstance(item, BaseException):
                return

    def _put(self, item):
        while not self._closed:
            try:
                self._ready.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
