"""robocache's exceptions. Each subclasses :class:`Error` and the built-in
it behaves as, so ``except ValueError`` catches bad input as it would from
NumPy or PyTorch. The native module raises these (robocache._native maps
each Rust error variant to one)."""


class Error(Exception):
    """Base class of every robocache error."""


class InvalidInputError(Error, ValueError):
    """Bad input: shapes, times, methods, grids, layouts (names the argument, row, index)."""


class DTypeError(InvalidInputError, TypeError):
    """An array of the wrong element type."""


class DeviceMismatchError(Error, ValueError):
    """Arrays on different devices in one call (a CPU array with a CUDA one)."""


class CudaUnavailableError(Error, RuntimeError):
    """CUDA was asked for but no CUDA device answers."""


class CudaError(Error, RuntimeError):
    """A CUDA driver or kernel failure."""


class OutOfMemoryError(CudaError):
    """The GPU ran out of memory: retry with a smaller batch or grid."""


class DatasetError(Error, ValueError):
    """A dataset could not be read or cut into windows (names the file, episode, key)."""


class InternalError(Error, RuntimeError):
    """A robocache bug: please report it with the message."""


class RobocacheWarning(UserWarning):
    """Something robocache read and went on from, said: a ROS 2 header stamp
    not trusted (its messages placed at their log time), a mapped topic
    missing from a bag, video frames before the first key frame, an MCAP
    summary read by a scan. Names the file, topic or stream and how many."""
