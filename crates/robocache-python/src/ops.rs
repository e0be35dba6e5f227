//! The operations: descriptors in, facade call, [`Array`]s out.

use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};
use robocache::{
    ChannelSpec, CropBox, DType, Device, FrameDType, FrameLayout, FrameOutput, FrameResize, FusionStreamInput, Method,
    ResampleSpec, StreamInput, TargetTimes, Tensor, TimeAxis, VoxelGrid, VoxelInput, VoxelMode,
};

use crate::arrays::{device_of, Array, ArrayDesc};
use crate::errors::{invalid, IntoPy};

/// Source times: an `f64` array, or `("uniform", start, hz)`.
#[derive(Debug)]
enum TimesArg {
    Uniform(String, f64, f64),
    Array(ArrayDesc),
}

/// Target times: an `f64` array, or `("uniform", start, hz, len)`.
#[derive(Debug)]
enum TargetsArg {
    Uniform(String, f64, f64, usize),
    Array(ArrayDesc),
}

/// A tuple whose first item is a string is a uniform form, anything else
/// an array descriptor: decided by looking, so that a call (every training
/// step) never builds the error of a failed extraction.
fn is_uniform_form(object: &Borrowed<'_, '_, PyAny>) -> bool {
    object
        .cast::<PyTuple>()
        .ok()
        .and_then(|tuple| tuple.get_item(0).ok())
        .is_some_and(|first| first.is_instance_of::<PyString>())
}

impl<'py> FromPyObject<'_, 'py> for TimesArg {
    type Error = PyErr;

    fn extract(object: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if !is_uniform_form(&object) {
            return Ok(TimesArg::Array(object.extract()?));
        }
        let (tag, start, hz): (String, f64, f64) =
            object.extract().map_err(|_| invalid("uniform times are ('uniform', start, hz)"))?;
        Ok(TimesArg::Uniform(tag, start, hz))
    }
}

impl<'py> FromPyObject<'_, 'py> for TargetsArg {
    type Error = PyErr;

    fn extract(object: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if !is_uniform_form(&object) {
            return Ok(TargetsArg::Array(object.extract()?));
        }
        let (tag, start, hz, len): (String, f64, f64, usize) =
            object.extract().map_err(|_| invalid("uniform target times are ('uniform', start, hz, count)"))?;
        Ok(TargetsArg::Uniform(tag, start, hz, len))
    }
}

/// One call: its device, the borrowed tensors it makes, the ordering with the caller's stream.
struct Call {
    device: Device,
}

impl Call {
    fn tensor(&self, what: &str, desc: &ArrayDesc) -> PyResult<Tensor> {
        // SAFETY: the Python function that called in holds every array it
        // described until it returns, and the work that reads them is
        // queued on the caller's stream itself (`ordered`), before whatever
        // the caller queues there next.
        unsafe { desc.tensor(what, &self.device) }
    }

    fn times(&self, what: &str, times: &TimesArg) -> PyResult<Option<Tensor>> {
        match times {
            TimesArg::Array(desc) => Ok(Some(self.tensor(what, desc)?)),
            TimesArg::Uniform(tag, ..) => uniform_tag(tag).map(|()| None),
        }
    }

    fn targets(&self, targets: &TargetsArg) -> PyResult<Option<Tensor>> {
        match targets {
            TargetsArg::Array(desc) => Ok(Some(self.tensor("target times", desc)?)),
            TargetsArg::Uniform(tag, ..) => uniform_tag(tag).map(|()| None),
        }
    }

    /// Runs `body` with a handle of the device that queues its work on the
    /// caller's `stream` itself (torch's current stream), so that the work
    /// follows what the caller queued before (its inputs are ready) and what
    /// the caller queues next follows it (results and inputs are safe to use
    /// and free there), with no event between streams and no host wait. On
    /// the CPU: `body` alone, then a wait for the device. A call that fails
    /// after queuing work leaves that work on the caller's stream too, in
    /// order before whatever the caller does next with its arrays.
    fn ordered<T>(&self, stream: Option<u64>, body: impl FnOnce(&Device) -> PyResult<T>) -> PyResult<T> {
        let Some(stream) = stream else {
            let out = body(&self.device)?;
            self.device.synchronize().py_err()?;
            return Ok(out);
        };
        crate::streams::note(stream);
        // SAFETY: `stream` is the caller's current stream on this device,
        // live for the call and, as torch's streams are, for the process;
        // the results allocated on it are freed by `Owned` after every
        // consumer's stream (or on it while it is the only one).
        let device = unsafe { self.device.on_external_stream(stream) };
        body(&device)
    }
}

fn uniform_tag(tag: &str) -> PyResult<()> {
    if tag == "uniform" {
        Ok(())
    } else {
        Err(invalid(format!("times must be an f64 array or ('uniform', start, hz[, len]), not a tuple tagged {tag:?}")))
    }
}

fn time_axis<'a>(times: &TimesArg, tensor: &'a Option<Tensor>) -> TimeAxis<'a> {
    match (times, tensor) {
        (_, Some(t)) => TimeAxis::Tensor(t),
        (TimesArg::Uniform(_, start, hz), None) => TimeAxis::Uniform { start: *start, hz: *hz },
        (TimesArg::Array(_), None) => unreachable!("an array argument always has its tensor"),
    }
}

fn target_times<'a>(targets: &TargetsArg, tensor: &'a Option<Tensor>) -> TargetTimes<'a> {
    match (targets, tensor) {
        (_, Some(t)) => TargetTimes::Tensor(t),
        (TargetsArg::Uniform(_, start, hz, len), None) => TargetTimes::Uniform { start: *start, hz: *hz, len: *len },
        (TargetsArg::Array(_), None) => unreachable!("an array argument always has its tensor"),
    }
}

/// A resample spec from its text forms: `channels` as the CLI takes it
/// (`linear`, or `0..3:linear,3..7:slerp-xyzw`), `boundary` as
/// `clamp|extrapolate|fill:VALUE`.
fn spec(channels: &str, boundary: &str) -> PyResult<ResampleSpec> {
    let channels: ChannelSpec = channels.parse().map_err(|e: String| invalid(format!("channels {channels:?}: {e}")))?;
    let boundary = boundary.parse().map_err(|e: String| invalid(format!("boundary {boundary:?}: {e}")))?;
    Ok(ResampleSpec { channels, boundary, ..ResampleSpec::new(Method::Linear) })
}

/// `resample(data, times, targets, channels, boundary, lengths, trusted, stream) -> (out, valid)`.
#[pyfunction]
#[pyo3(signature = (data, times, targets, channels, boundary, lengths, trusted, stream))]
#[allow(clippy::too_many_arguments)]
fn resample(
    py: Python<'_>,
    data: ArrayDesc,
    times: TimesArg,
    targets: TargetsArg,
    channels: &str,
    boundary: &str,
    lengths: Option<ArrayDesc>,
    trusted: bool,
    stream: Option<u64>,
) -> PyResult<(Array, Array)> {
    let call = Call { device: device_of(&data)? };
    let spec = ResampleSpec { trusted, ..spec(channels, boundary)? };
    let data_tensor = call.tensor("data", &data)?;
    let times_tensor = call.times("source times", &times)?;
    let targets_tensor = call.targets(&targets)?;
    let lengths_tensor = lengths.as_ref().map(|l| call.tensor("lengths", l)).transpose()?;
    let out = py.detach(|| {
        call.ordered(stream, |device| {
            let mut input = StreamInput::new(&data_tensor, time_axis(&times, &times_tensor));
            if let Some(l) = &lengths_tensor {
                input = input.with_lengths(l);
            }
            device.resample(&input, &target_times(&targets, &targets_tensor), &spec).py_err()
        })
    })?;
    // The results share one allocation, freed together.
    Ok(Array::pair(out.data, out.valid, stream))
}

/// `fuse([(data, times, lengths, channels, boundary)], targets, dtype, trusted, stream) -> (out, valid, offsets)`.
#[pyfunction]
#[pyo3(signature = (streams, targets, dtype, trusted, stream))]
fn fuse(
    py: Python<'_>,
    streams: Vec<(ArrayDesc, TimesArg, Option<ArrayDesc>, String, String)>,
    targets: TargetsArg,
    dtype: &str,
    trusted: bool,
    stream: Option<u64>,
) -> PyResult<(Array, Array, Vec<usize>)> {
    let first = streams.first().ok_or_else(|| invalid("fuse needs at least one stream"))?;
    let call = Call { device: device_of(&first.0)? };
    let dtype = DType::from_name(dtype).ok_or_else(|| invalid(format!("fuse: unknown output dtype {dtype:?}")))?;
    let mut tensors = Vec::with_capacity(streams.len());
    for (k, (data, times, lengths, channels, boundary)) in streams.iter().enumerate() {
        tensors.push((
            call.tensor(&format!("stream {k} data"), data)?,
            call.times(&format!("stream {k} source times"), times)?,
            lengths.as_ref().map(|l| call.tensor(&format!("stream {k} lengths"), l)).transpose()?,
            ResampleSpec { trusted, ..spec(channels, boundary)? },
        ));
    }
    let targets_tensor = call.targets(&targets)?;
    let out = py.detach(|| {
        call.ordered(stream, |device| {
            let inputs: Vec<FusionStreamInput<'_>> = tensors
                .iter()
                .zip(&streams)
                .map(|((data, times, lengths, spec), (_, time_arg, ..))| {
                    let mut input = StreamInput::new(data, time_axis(time_arg, times));
                    if let Some(l) = lengths {
                        input = input.with_lengths(l);
                    }
                    FusionStreamInput { stream: input, spec: spec.clone() }
                })
                .collect();
            device.fuse(&inputs, &target_times(&targets, &targets_tensor), dtype).py_err()
        })
    })?;
    // The results share one allocation, freed together.
    let (data, valid) = Array::pair(out.data, out.valid, stream);
    Ok((data, valid, out.offsets))
}

/// `voxelize(points, features, clouds, num_clouds, origin, voxel_size, dims, mode, budget_bytes, stream)
/// -> (grid, counts | None, dropped)`.
#[pyfunction]
#[pyo3(signature = (points, features, clouds, num_clouds, origin, voxel_size, dims, mode, budget_bytes, stream))]
#[allow(clippy::too_many_arguments)]
fn voxelize(
    py: Python<'_>,
    points: ArrayDesc,
    features: Option<ArrayDesc>,
    clouds: Option<ArrayDesc>,
    num_clouds: usize,
    origin: [f32; 3],
    voxel_size: [f32; 3],
    dims: [usize; 3],
    mode: &str,
    budget_bytes: u64,
    stream: Option<u64>,
) -> PyResult<(Array, Option<Array>, Array)> {
    let call = Call { device: device_of(&points)? };
    let mode: VoxelMode = mode.parse().map_err(|e: String| invalid(format!("mode {mode:?}: {e}")))?;
    let points_tensor = call.tensor("points", &points)?;
    let features_tensor = features.as_ref().map(|f| call.tensor("features", f)).transpose()?;
    let clouds_tensor = clouds.as_ref().map(|c| call.tensor("cloud index", c)).transpose()?;
    let grid = VoxelGrid { origin, voxel_size, dims };
    let out = py.detach(|| {
        call.ordered(stream, |device| {
            let input = VoxelInput {
                points: &points_tensor,
                features: features_tensor.as_ref(),
                clouds: clouds_tensor.as_ref().map(|c| (c, num_clouds)),
            };
            device.voxelize(&input, &grid, mode, budget_bytes).py_err()
        })
    })?;
    Ok((Array::new(out.grid, stream), out.counts.map(|c| Array::new(c, stream)), Array::new(out.dropped, stream)))
}

/// What camera frames become, from the Python arguments: `layout` `hwc` or
/// `chw`, `dtype` `uint8` or `float32`, `size` `(height, width)` and `crop`
/// `(top, left, height, width)` (torchvision's orders; a crop alone keeps
/// its size).
pub(crate) fn frame_output(
    layout: &str,
    dtype: &str,
    size: Option<(usize, usize)>,
    crop: Option<(usize, usize, usize, usize)>,
) -> PyResult<FrameOutput> {
    let layout = match layout {
        "hwc" => FrameLayout::Hwc,
        "chw" => FrameLayout::Chw,
        other => return Err(invalid(format!("frame layout {other:?}: expected hwc or chw"))),
    };
    let dtype = match dtype {
        "uint8" => FrameDType::U8,
        "float32" => FrameDType::F32,
        other => return Err(invalid(format!("frame dtype {other:?}: expected uint8 or float32"))),
    };
    let crop = crop.map(|(top, left, height, width)| CropBox { left, top, width, height });
    let resize = match (size, crop) {
        (Some((height, width)), crop) => Some(FrameResize { width, height, crop }),
        (None, Some(crop)) => Some(FrameResize { width: crop.width, height: crop.height, crop: Some(crop) }),
        (None, None) => None,
    };
    Ok(FrameOutput { layout, dtype, resize })
}

/// `convert_frames(frames, size, crop, layout, dtype, stream) -> out`.
#[pyfunction]
#[pyo3(signature = (frames, size, crop, layout, dtype, stream))]
fn convert_frames(
    py: Python<'_>,
    frames: ArrayDesc,
    size: Option<(usize, usize)>,
    crop: Option<(usize, usize, usize, usize)>,
    layout: &str,
    dtype: &str,
    stream: Option<u64>,
) -> PyResult<Array> {
    let call = Call { device: device_of(&frames)? };
    let output = frame_output(layout, dtype, size, crop)?;
    let frames_tensor = call.tensor("frames", &frames)?;
    let out = py.detach(|| call.ordered(stream, |device| device.convert_frames(&frames_tensor, output).py_err()))?;
    Ok(Array::new(out, stream))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(resample, m)?)?;
    m.add_function(wrap_pyfunction!(fuse, m)?)?;
    m.add_function(wrap_pyfunction!(voxelize, m)?)?;
    m.add_function(wrap_pyfunction!(convert_frames, m)?)?;
    Ok(())
}
