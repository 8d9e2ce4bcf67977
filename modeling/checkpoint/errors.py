"""The reader's refusals: each names its file, and knows where, so that the machinery, which
knows the flag a path came from, can name it there too (`bert_runner.runs.checkpoint_flags`).
This package knows no flag. Loads without TensorFlow (the flags' checks raise them).
"""


class _NamesItsFile:
    """An error whose message names `file`: the path as given, or the checkpoint prefix found for
    it, first where it first appears in the message."""

    def __init__(self, message, file):
        super().__init__(message)
        self.file = file

    def naming(self, named):
        """The message with `file`, where it first appears, written as `named`."""
        return str(self).replace(self.file, named, 1)


class CheckpointError(_NamesItsFile, ValueError):
    """A starting point that cannot be read, or does not fit the model."""


class CheckpointNotFoundError(_NamesItsFile, FileNotFoundError):
    """No checkpoint where one was named; says what is there instead."""


class AdaptersError(CheckpointError):
    """A LoRA run's adapters file that cannot be read, or not onto this base or model: `file` is
    the adapters file (not the base checkpoint)."""
