//! Batches of dataset windows on a device: every stream of every sampled
//! window as one tensor `[B, T, ...step_shape]` with its valid mask `[B, T]`.
//!
//! - Step windows ([`Device::step_window_batch`]) gather rows exactly as
//!   robomimic's `SequenceDataset` does (edges repeated, pad mask false there).
//! - Time windows ([`Device::time_window_batch`]) read, per sample and
//!   stream, only the rows that bracket the window's targets, then resample
//!   every stream onto the policy clock by its channel kind in one call per
//!   stream on the device; the mask is false where a target lies outside
//!   the stream. Angle channels are unwrapped along each window first, so the
//!   result is continuous inside a window and equals the angle modulo 2π.

use robocache_cpu::{Boundary, DType, HostVec, QuaternionOrder, ResampleSpec};
use robocache_datasets::{
    ChannelKind, Dataset, DeltaWindows, FrameFormat, StepWindows, StreamInfo, StreamKind, TimeWindows,
};
use robocache_video::yuv420_len;

mod angles;
pub(crate) mod causal;
mod video_frames;

pub(crate) use video_frames::CachedFrames;

use angles::unwrap_angles;
pub(crate) use angles::{unwrap_angle_channels, AngleUnwrap};

pub use crate::assembly::{BatchStream, MaskKind};
use crate::batch_buffer::{BatchBuffer, BatchUpload};
use crate::{Device, DeviceFrameCache, Error, FrameOutput, Result, StreamInput, TargetTimes, Tensor, TimeAxis};

/// A batch of windows: one [`BatchStream`] per requested stream, plus where
/// each window came from.
#[derive(Clone, Debug)]
pub struct WindowBatch {
    /// The streams, in the order they were asked for.
    pub streams: Vec<BatchStream>,
    /// The sample number of each row.
    pub samples: Vec<usize>,
    /// The episode index of each row.
    pub episodes: Vec<usize>,
    /// The anchor of each row in seconds on its episode's clock (step
    /// windows: the anchor step over the dataset's rate).
    pub anchors: Vec<f64>,
    /// The loader's batches: `samples`, `episodes` and `anchors` on the
    /// batch's device as one `i64 [3, B]` tensor, row by row (row 2 holds
    /// the anchors' `f64` bits), placed there with the batch so a consumer
    /// on the device needs no upload of its own. `None` from
    /// [`Device::step_window_batch`] and [`Device::time_window_batch`].
    pub columns: Option<Tensor>,
}

impl WindowBatch {
    /// A batch of `streams` for `samples`, with each window's episode and
    /// anchor (seconds) in order, without columns.
    fn of_windows(streams: Vec<BatchStream>, samples: &[usize], windows: impl Iterator<Item = (usize, f64)>) -> Self {
        let (episodes, anchors) = windows.unzip();
        WindowBatch { streams, samples: samples.to_vec(), episodes, anchors, columns: None }
    }

    /// The stream called `name`.
    pub fn stream(&self, name: &str) -> Option<&BatchStream> {
        self.streams.iter().find(|s| s.name == name)
    }

    /// Number of windows.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// True for a batch of no windows.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

impl Device {
    /// Step windows `samples` of `windows` for `streams`, on this device.
    ///
    /// ```
    /// use robocache::datasets::{synthetic, Dataset, StepWindowSpec, StepWindows};
    /// use robocache::Device;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("demo.hdf5");
    /// synthetic::write_robomimic(&path, &synthetic::SyntheticSpec { episodes: 4, image: None, ..Default::default() })?;
    /// let dataset = Dataset::open(&path)?;
    /// let spec = StepWindowSpec { seq_length: 16, frame_stack: 2, ..Default::default() };
    /// let windows = StepWindows::new(dataset.info(), &spec)?;
    /// let batch = Device::Cpu.step_window_batch(&dataset, &windows, &[0, 1, 2], &["actions"])?;
    /// assert_eq!(batch.streams[0].data.shape(), [3, 17, 7]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn step_window_batch(
        &self,
        dataset: &Dataset,
        windows: &StepWindows,
        samples: &[usize],
        streams: &[&str],
    ) -> Result<WindowBatch> {
        self.step_window_batch_from(dataset, windows, samples, streams, None)
    }

    /// [`Device::step_window_batch`] with the loader's `columns` (`i64 [3,
    /// B]`) placed on the device with the rows: every stream's rows, masks
    /// and the columns in one upload.
    pub(crate) fn step_window_batch_from(
        &self,
        dataset: &Dataset,
        windows: &StepWindows,
        samples: &[usize],
        streams: &[&str],
        columns: Option<&[i64]>,
    ) -> Result<WindowBatch> {
        let cut: Vec<_> = samples.iter().map(|&s| windows.window(s)).collect::<Result<_, _>>()?;
        let steps = windows.spec().window_len();
        let rate = dataset.info().rate_hz;
        let anchors = cut.iter().map(|w| (w.episode, w.step as f64 / rate));
        let Some(first) = cut.first() else {
            let out = streams.iter().map(|&name| empty_stream(self, name, steps)).collect::<Result<_>>()?;
            let mut batch = WindowBatch::of_windows(out, samples, anchors);
            batch.columns = columns.map(|c| Tensor::from_slice(self, c, &[3, 0])).transpose()?;
            return Ok(batch);
        };
        let mut infos = Vec::with_capacity(streams.len());
        let (mut parts, mut shapes, mut names) = (Vec::new(), Vec::new(), Vec::new());
        for &name in streams {
            let info = dataset.stream(first.episode, name)?.1;
            parts.push((info.dtype, cut.len() * steps * info.channels()));
            let mut shape = vec![cut.len(), steps];
            shape.extend(&info.step_shape);
            shapes.push(shape);
            parts.push((DType::Bool, cut.len() * steps));
            shapes.push(vec![cut.len(), steps]);
            names.extend([name, name]);
            infos.push(info);
        }
        if let Some(columns) = columns {
            parts.push((DType::I64, columns.len()));
            shapes.push(vec![3, cut.len()]);
            names.push("columns");
        }
        let mut upload = BatchUpload::new(self, &parts)?;
        for (k, (&name, info)) in streams.iter().zip(&infos).enumerate() {
            let row_bytes = info.step_bytes();
            let mut mask = Vec::with_capacity(cut.len() * steps);
            let data = upload.part_mut(2 * k);
            for (window, bytes) in cut.iter().zip(data.chunks_exact_mut(steps * row_bytes.max(1))) {
                let part = dataset.read_step_window(window, name)?;
                if part.dtype() != info.dtype || part.len() * part.dtype().size_in_bytes() != bytes.len() {
                    return Err(Error::Dataset(robocache_datasets::Error::Invalid(format!(
                        "stream `{name}` is {} {:?} in episode {} but {} ({} elements a window) in episode {}: a batch needs one layout per stream",
                        info.dtype, info.step_shape, first.episode, part.dtype(), part.len(), window.episode
                    ))));
                }
                bytes.copy_from_slice(part.as_slice().as_bytes());
                mask.extend(window.pad_mask());
            }
            upload.set_flags(2 * k + 1, mask)?;
        }
        if let Some(columns) = columns {
            upload.set_i64(parts.len() - 1, columns)?;
        }
        let mut placed = upload.into_tensors(self, &shapes, &names)?.into_iter();
        let mut out = Vec::with_capacity(streams.len());
        for &name in streams {
            let (Some(data), Some(mask)) = (placed.next(), placed.next()) else {
                return Err(Error::Internal(format!("stream `{name}`: its batch upload has no part")));
            };
            out.push(BatchStream { name: name.to_owned(), data, mask, mask_kind: MaskKind::Valid });
        }
        let mut batch = WindowBatch::of_windows(out, samples, anchors);
        batch.columns = placed.next();
        Ok(batch)
    }

    /// LeRobot `delta_timestamps` windows `samples` of `windows` for
    /// `streams`, on this device: stream `k` as `[B, T_k, ...step_shape]`
    /// (`T_k` its offsets; a stream the spec does not name reads the
    /// sample's own frame, `T = 1`), rows clamped into the episode, with
    /// [`MaskKind::Pad`] masks (LeRobot's `<key>_is_pad`). Values are the
    /// dataset's own, bit for bit.
    ///
    /// ```
    /// use robocache::datasets::{synthetic, Dataset, DeltaTimestamps, DeltaWindows};
    /// use robocache::Device;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("demo.hdf5");
    /// synthetic::write_robomimic(&path, &synthetic::SyntheticSpec { episodes: 2, image: None, ..Default::default() })?;
    /// let dataset = Dataset::open(&path)?; // 20 Hz
    /// let spec = DeltaTimestamps::new(vec![("actions".into(), vec![-0.05, 0.0, 0.05, 0.1])]);
    /// let windows = DeltaWindows::new(dataset.info(), &spec)?;
    /// let batch = Device::Cpu.delta_window_batch(&dataset, &windows, &[0, 1], &["actions"])?;
    /// assert_eq!(batch.streams[0].data.shape(), [2, 4, 7]);
    /// assert_eq!(batch.streams[0].mask.to_vec::<bool>()?, [true, false, false, false, false, false, false, false]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delta_window_batch(
        &self,
        dataset: &Dataset,
        windows: &DeltaWindows,
        samples: &[usize],
        streams: &[&str],
    ) -> Result<WindowBatch> {
        self.delta_window_batch_with_frames(dataset, windows, samples, streams, FrameOutput::default())
    }

    /// [`Device::delta_window_batch`] with camera frames as `frames` says:
    /// `[B, T, H, W, 3]` or `[B, T, 3, H, W]`, u8 or f32, cropped and
    /// resized when it asks. Video frames are read as the decoder's YUV
    /// 4:2:0 planes (half the bytes of RGB), put on this device and
    /// converted there ([`Device::yuv420_to_rgb`]); camera frames stored as
    /// images (u8 `[H, W, 3]` image streams) are converted there too
    /// ([`Device::convert_frames`]); other streams are as
    /// [`Device::delta_window_batch`] gives them.
    pub fn delta_window_batch_with_frames(
        &self,
        dataset: &Dataset,
        windows: &DeltaWindows,
        samples: &[usize],
        streams: &[&str],
        frames: FrameOutput,
    ) -> Result<WindowBatch> {
        self.delta_window_batch_from(dataset, windows, samples, streams, frames, None, None)
    }

    /// [`Device::delta_window_batch_with_frames`] with the video frames
    /// `cache` holds stacked from there ([`Device::stack_frames`]), and the
    /// others decoded, converted and resized as before, then kept in `cache`
    /// while its budget lasts. The values are those of the uncached call,
    /// bit for bit. `cache` must be on this device (and its stream), with
    /// `frames.resize` as its crop and resize.
    ///
    /// ```
    /// use robocache::datasets::{Dataset, DeltaTimestamps, DeltaWindows};
    /// use robocache::{Device, DeviceFrameCache, FrameOutput};
    ///
    /// let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../robocache-datasets/tests/fixtures/lerobot/av1");
    /// let dataset = Dataset::open(&root)?;
    /// let camera = "observation.images.front"; // 10 fps
    /// let spec = DeltaTimestamps::new(vec![(camera.into(), vec![-0.1, 0.0])]);
    /// let windows = DeltaWindows::new(dataset.info(), &spec)?;
    /// let device = Device::cpu();
    /// let cache = DeviceFrameCache::new(&device, None, 64 << 20);
    /// let frames = FrameOutput::default();
    /// let first = device.delta_window_batch_cached(&dataset, &windows, &[3, 4], &[camera], frames, &cache)?;
    /// assert_eq!(cache.usage().misses, 3); // frames 2, 3 and 4 of episode 0
    /// let again = device.delta_window_batch_cached(&dataset, &windows, &[3, 4], &[camera], frames, &cache)?;
    /// assert_eq!(cache.usage().hits, 3);
    /// assert_eq!(first.streams[0].data.to_vec::<u8>()?, again.streams[0].data.to_vec::<u8>()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delta_window_batch_cached(
        &self,
        dataset: &Dataset,
        windows: &DeltaWindows,
        samples: &[usize],
        streams: &[&str],
        frames: FrameOutput,
        cache: &DeviceFrameCache,
    ) -> Result<WindowBatch> {
        cache.check_use(self, frames.resize)?;
        let cached = CachedFrames { cache, augment: Box::new(|_, _| None) };
        self.delta_window_batch_from(dataset, windows, samples, streams, frames, Some(cached), None)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn delta_window_batch_from(
        &self,
        dataset: &Dataset,
        windows: &DeltaWindows,
        samples: &[usize],
        streams: &[&str],
        frames: FrameOutput,
        mut cached: Option<CachedFrames<'_>>,
        columns: Option<&[i64]>,
    ) -> Result<WindowBatch> {
        let cut: Vec<_> = samples.iter().map(|&s| windows.window(s)).collect::<Result<_, _>>()?;
        let fps = windows.fps();
        let anchors = cut.iter().map(|w| (w.episode, w.frame as f64 / fps));
        let Some(first) = cut.first() else {
            let out = streams
                .iter()
                .map(|&name| empty_stream(self, name, windows.offsets_of(name).map_or(1, <[i64]>::len)))
                .collect::<Result<_>>()?;
            let mut batch = WindowBatch::of_windows(out, samples, anchors);
            batch.columns = columns.map(|c| Tensor::from_slice(self, c, &[3, 0])).transpose()?;
            return Ok(batch);
        };
        // Every stream's rows (but video frames, decoded into their own
        // buffers), every mask and the columns go to the device in one upload.
        let mut plans = Vec::with_capacity(streams.len());
        let mut parts = Vec::with_capacity(2 * streams.len() + 1);
        let mut shapes: Vec<Vec<usize>> = Vec::with_capacity(parts.capacity());
        let mut names = Vec::with_capacity(parts.capacity());
        for &name in streams {
            let offsets = windows.offsets_of(name).unwrap_or(&[0]);
            let steps = offsets.len();
            let info = dataset.stream(first.episode, name)?.1;
            for window in &cut {
                let (_, here) = dataset.stream(window.episode, name)?;
                if here.dtype != info.dtype || here.step_shape != info.step_shape {
                    return Err(Error::Dataset(robocache_datasets::Error::Invalid(format!(
                        "stream `{name}` is {} {:?} in episode {} but {} {:?} in episode {}: a batch needs one layout per stream",
                        info.dtype, info.step_shape, first.episode, here.dtype, here.step_shape, window.episode
                    ))));
                }
            }
            let video = dataset.video_frame_size(name);
            let data_at = match video {
                Some(_) => None,
                None => {
                    parts.push((info.dtype, cut.len() * steps * info.channels()));
                    let mut shape = vec![cut.len(), steps];
                    shape.extend(&info.step_shape);
                    shapes.push(shape);
                    names.push(name);
                    Some(parts.len() - 1)
                }
            };
            parts.push((DType::Bool, cut.len() * steps));
            shapes.push(vec![cut.len(), steps]);
            names.push(name);
            plans.push(DeltaPlan {
                name,
                offsets,
                video,
                image: rgb_image_size(info),
                data_at,
                mask_at: parts.len() - 1,
            });
        }
        if let Some(columns) = columns {
            parts.push((DType::I64, columns.len()));
            shapes.push(vec![3, cut.len()]);
            names.push("columns");
        }
        // Video first, into its own staging buffers (each uploaded as it is
        // filled), so that no thread holds the upload's buffer while it
        // waits for the pool to lend another.
        let mut video_reads = match cached {
            None => self.read_video_streams_at_once(dataset, windows, &cut, streams)?,
            Some(_) => Vec::new(),
        };
        let mut decoded: Vec<Option<(Tensor, Vec<bool>)>> = Vec::with_capacity(plans.len());
        for plan in &plans {
            let (name, offsets, steps) = (plan.name, plan.offsets, plan.offsets.len());
            decoded.push(match (plan.video, cached.as_mut()) {
                (Some(size), Some(cached)) => {
                    let converted = self.cached_video_frames(dataset, cached, name, &cut, offsets, size, frames)?;
                    let mut shape = vec![cut.len(), steps];
                    shape.extend(&converted.shape()[1..]);
                    let pad = cut.iter().flat_map(|w| offsets.iter().map(move |&d| w.row(d).1)).collect();
                    Some((converted.reshape(&shape)?, pad))
                }
                (Some((width, height)), None) => {
                    // The whole batch in one read: each group of pictures
                    // decoded once for all the windows that need a frame of it.
                    let (count, frame_bytes) = (cut.len() * steps, yuv420_len(width, height));
                    let (planes, pad) = match video_reads.iter().position(|read| read.stream == name) {
                        Some(at) => video_reads.swap_remove(at).planes_and_pads?,
                        None => {
                            let mut planes = BatchBuffer::new(self, DType::U8, count * frame_bytes)?;
                            let bytes = planes.as_mut_bytes();
                            let pad =
                                dataset.read_delta_frames_into(&cut, name, offsets, FrameFormat::Yuv420, bytes)?;
                            (planes.into_tensor(self, &[count, frame_bytes], name)?, pad)
                        }
                    };
                    let rgb = self.yuv420_to_rgb(&planes, width, height, frames)?;
                    let mut shape = vec![cut.len(), steps];
                    shape.extend(&rgb.shape()[1..]);
                    Some((rgb.reshape(&shape)?, pad))
                }
                (None, _) => None,
            });
        }
        let mut upload = BatchUpload::new(self, &parts)?;
        if let Some(columns) = columns {
            upload.set_i64(parts.len() - 1, columns)?;
        }
        let mut video = Vec::with_capacity(plans.len());
        for (plan, decoded) in plans.iter().zip(decoded) {
            let pad = match (decoded, plan.data_at) {
                (Some((rgb, pad)), _) => {
                    video.push(Some(rgb));
                    pad
                }
                (None, Some(data_at)) => {
                    video.push(None);
                    dataset.read_delta_windows_into(&cut, plan.name, plan.offsets, upload.part_mut(data_at))?
                }
                (None, None) => {
                    return Err(Error::Internal(format!("stream `{}`: no room planned for its rows", plan.name)))
                }
            };
            upload.set_flags(plan.mask_at, pad)?;
        }
        let mut placed: Vec<Option<Tensor>> =
            upload.into_tensors(self, &shapes, &names)?.into_iter().map(Some).collect();
        let mut out = Vec::with_capacity(plans.len());
        for (plan, video) in plans.iter().zip(video) {
            let steps = plan.offsets.len();
            let data = match (video, plan.data_at) {
                (Some(data), _) => data,
                (None, Some(at)) => {
                    let data = take_part(&mut placed, at)?;
                    match plan.image {
                        // Camera frames stored as images: converted as video is.
                        Some((width, height)) if frames != FrameOutput::default() => {
                            let images = data.reshape(&[cut.len() * steps, height, width, 3])?;
                            let converted = self.convert_frames(&images, frames)?;
                            let mut shape = vec![cut.len(), steps];
                            shape.extend(&converted.shape()[1..]);
                            converted.reshape(&shape)?
                        }
                        _ => data,
                    }
                }
                (None, None) => return Err(Error::Internal(format!("stream `{}`: no rows read", plan.name))),
            };
            let mask = take_part(&mut placed, plan.mask_at)?;
            out.push(BatchStream { name: plan.name.to_owned(), data, mask, mask_kind: MaskKind::Pad });
        }
        let mut batch = WindowBatch::of_windows(out, samples, anchors);
        if columns.is_some() {
            batch.columns = Some(take_part(&mut placed, parts.len() - 1)?);
        }
        Ok(batch)
    }

    /// Time windows `samples` of `windows` for `streams`, each stream
    /// resampled onto the windows' targets by its kind, on this device.
    ///
    /// ```
    /// use robocache::datasets::{synthetic, Dataset, TimeWindowSpec, TimeWindows};
    /// use robocache::Device;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("demo.hdf5");
    /// synthetic::write_robomimic(&path, &synthetic::SyntheticSpec { episodes: 4, image: None, ..Default::default() })?;
    /// let dataset = Dataset::open(&path)?;
    /// let streams = ["actions", "obs/joint_pos", "obs/robot0_eef_quat"]; // 20 Hz, 100 Hz, 20 Hz
    /// let spec = TimeWindowSpec { hz: 50.0, history: 2, horizon: 16, causal: false };
    /// let windows = TimeWindows::new(&dataset, &streams, &spec)?;
    /// let batch = Device::auto().time_window_batch(&dataset, &windows, &[0, 10, 20], &streams)?;
    /// assert_eq!(batch.stream("obs/joint_pos").unwrap().data.shape(), [3, 18, 7]);
    /// let valid = batch.streams[0].mask.to_vec::<bool>()?; // MaskKind::Valid
    /// assert!(!valid[0] && valid[2]); // sample 0 is anchored at t = 0: its history is padding
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn time_window_batch(
        &self,
        dataset: &Dataset,
        windows: &TimeWindows,
        samples: &[usize],
        streams: &[&str],
    ) -> Result<WindowBatch> {
        let cut: Vec<_> = samples.iter().map(|&s| windows.window(s)).collect::<Result<_, _>>()?;
        let batch = cut.len();
        let steps = windows.spec().window_len();
        let targets: Vec<f64> = cut.iter().flat_map(|w| windows.targets(w)).collect();
        let causal = windows.spec().causal;
        let target_tensor = Tensor::from_slice(self, &targets, &[batch, steps])?;
        let mut out = Vec::with_capacity(streams.len());
        for &name in streams {
            // First the rows each window needs, then one buffer for the
            // batch that every window's rows are read into.
            let mut row_ranges = Vec::with_capacity(batch);
            let mut row_times = Vec::with_capacity(batch);
            // Causal windows: each window's stream's first time (the mask),
            // and whether a zero row leads its rows (targets before it).
            let mut firsts: Vec<Option<f64>> = Vec::with_capacity(batch);
            let mut leading_zero = Vec::with_capacity(batch);
            let mut info: Option<&StreamInfo> = None;
            for window in &cut {
                let (_, stream) = dataset.stream(window.episode, name)?;
                if let Some(first) = info {
                    if first.dtype != stream.dtype || first.step_shape != stream.step_shape || first.kind != stream.kind
                    {
                        return Err(Error::Dataset(robocache_datasets::Error::Invalid(format!(
                            "stream `{name}` is {} {:?} ({}) in episode {} but {} {:?} ({}) in episode {}: a batch needs one layout per stream",
                            first.dtype, first.step_shape, first.kind, cut[0].episode,
                            stream.dtype, stream.step_shape, stream.kind, window.episode
                        ))));
                    }
                }
                info = Some(stream);
                let times = dataset.times(window.episode, name)?;
                let wanted = windows.targets(window);
                let last_target = wanted[wanted.len() - 1];
                if times.is_empty() {
                    // No rows in this episode (a topic missing from a bag):
                    // one neutral padding row after every target, so the
                    // whole window is masked.
                    row_times.push(vec![last_target + 1.0]);
                    row_ranges.push(None);
                    firsts.push(None);
                    leading_zero.push(false);
                    continue;
                }
                let rows = times.rows_covering(wanted[0], last_target);
                let mut these: Vec<f64> = rows.clone().map(|i| times.time(i)).collect();
                let first = times.time(0);
                // Causal: targets before the first sample hold a zero row.
                let zero = causal && wanted[0] < first;
                if zero {
                    these.insert(0, wanted[0] - 1.0);
                }
                row_times.push(these);
                row_ranges.push(Some(rows));
                firsts.push(Some(first));
                leading_zero.push(zero);
            }
            let Some(info) = info else {
                out.push(empty_stream(self, name, steps)?);
                continue;
            };
            let channels = info.channels().max(1);
            let longest = row_times.iter().map(Vec::len).max().unwrap_or(1);
            let lengths: Vec<u32> = row_times.iter().map(|t| t.len() as u32).collect();
            // Rows shorter than the longest repeat their last sample (masked by `lengths`).
            let mut times = Vec::with_capacity(batch * longest);
            for t in &row_times {
                times.extend(t);
                let last = t[t.len() - 1];
                times.extend((1..=longest - t.len()).map(|k| last + k as f64));
            }
            let row_bytes = info.step_bytes();
            // Windows of one episode whose rows overlap (consecutive ticks)
            // read their rows once, together: each frame decoded once, many
            // side by side.
            let shared = shared_reads(dataset, name, &cut, &row_ranges, row_bytes)?;
            let mut data = BatchBuffer::new(self, info.dtype, batch * longest * channels)?;
            for (w, (window, (rows, bytes))) in cut
                .iter()
                .zip(row_ranges.iter().zip(data.as_mut_bytes().chunks_exact_mut(longest * row_bytes.max(1))))
                .enumerate()
            {
                let lead = usize::from(leading_zero[w]);
                let (read, padding) = match rows {
                    Some(rows) => {
                        let (read, padding) = bytes.split_at_mut((lead + rows.len()) * row_bytes);
                        let (zero, read) = read.split_at_mut(lead * row_bytes);
                        zero.fill(0);
                        match shared.get(&w) {
                            Some((span, bytes)) => read.copy_from_slice(
                                &bytes[(rows.start - span.start) * row_bytes..(rows.end - span.start) * row_bytes],
                            ),
                            None => dataset.read_rows_into(window.episode, name, rows.clone(), read)?,
                        }
                        unwrap_angles(name, read, rows.len(), info)?;
                        (read, padding)
                    }
                    None => {
                        let (read, padding) = bytes.split_at_mut(row_bytes);
                        match causal {
                            true => read.fill(0),
                            false => write_neutral_row(info, read),
                        }
                        (read, padding)
                    }
                };
                // Rows shorter than the longest repeat their last sample.
                let last = &read[read.len() - row_bytes..];
                for row in padding.chunks_exact_mut(row_bytes.max(1)) {
                    row.copy_from_slice(last);
                }
            }
            let data = data.into_tensor(self, &[batch, longest, channels], name)?;
            let times = Tensor::from_host_vec(self, HostVec::F64(times), &[batch, longest])?;
            let lengths = Tensor::from_host_vec(self, HostVec::U32(lengths), &[batch])?;
            let stream = StreamInput::new(&data, TimeAxis::Tensor(&times)).with_lengths(&lengths);
            let spec = ResampleSpec::new(robocache_cpu::Method::Linear)
                .with_channels(crate::assembly::window_methods(&info.kind.channel_spec(), causal))
                .with_boundary(Boundary::Clamp);
            let resampled = self.resample(&stream, &TargetTimes::Tensor(&target_tensor), &spec)?;
            let mut shape = vec![batch, steps];
            shape.extend(&info.step_shape);
            let data = resampled.data.reshape(&shape)?;
            out.push(match causal {
                // The causal mask: a sample at or before the target exists
                // (the values before the first are the leading zero row).
                true => {
                    let mask = targets
                        .chunks_exact(steps)
                        .zip(&firsts)
                        .flat_map(|(targets, first)| targets.iter().map(move |&q| first.is_some_and(|f| q >= f)))
                        .collect();
                    BatchStream::with_host_mask(self, name, data, mask, [batch, steps], MaskKind::Valid)?
                }
                false => BatchStream { name: name.to_owned(), data, mask: resampled.valid, mask_kind: MaskKind::Valid },
            });
        }
        Ok(WindowBatch::of_windows(out, samples, cut.iter().map(|w| (w.episode, w.anchor))))
    }
}

/// One read of rows shared by several windows: its rows and their bytes.
type SharedRead = (std::ops::Range<usize>, std::sync::Arc<Vec<u8>>);

/// The reads that windows of one episode whose row ranges overlap share:
/// per window (its index in `cut`), the merged span it lies in and that
/// span's bytes, read once. Windows that overlap no other read alone.
fn shared_reads(
    dataset: &Dataset,
    name: &str,
    cut: &[robocache_datasets::TimeWindow],
    row_ranges: &[Option<std::ops::Range<usize>>],
    row_bytes: usize,
) -> Result<std::collections::HashMap<usize, SharedRead>> {
    let mut order: Vec<usize> = (0..cut.len()).filter(|&w| row_ranges[w].is_some()).collect();
    order.sort_by_key(|&w| (cut[w].episode, row_ranges[w].as_ref().map_or(0, |r| r.start)));
    let mut shared = std::collections::HashMap::new();
    let mut at = 0;
    while at < order.len() {
        let first = order[at];
        let mut span = row_ranges[first].clone().unwrap_or_default();
        let mut members = vec![first];
        while let Some(&next) = order.get(at + members.len()) {
            match &row_ranges[next] {
                Some(rows) if cut[next].episode == cut[first].episode && rows.start < span.end => {
                    span.end = span.end.max(rows.end);
                    members.push(next);
                }
                _ => break,
            }
        }
        at += members.len();
        if members.len() > 1 {
            let mut bytes = vec![0u8; span.len() * row_bytes];
            dataset.read_rows_into(cut[first].episode, name, span.clone(), &mut bytes)?;
            let bytes = std::sync::Arc::new(bytes);
            for w in members {
                shared.insert(w, (span.clone(), bytes.clone()));
            }
        }
    }
    Ok(shared)
}

/// The row that stands for a stream without rows in an episode (every step
/// of its windows masked): zeros, and the identity for each quaternion (so
/// that slerp's normalisation has a unit to keep).
pub(crate) fn neutral_row(info: &StreamInfo) -> Vec<f64> {
    let channels = info.channels();
    let mut row = vec![0.0; channels];
    let quaternions: Vec<(std::ops::Range<usize>, QuaternionOrder)> = match &info.kind {
        StreamKind::All(ChannelKind::Quaternion(order)) => vec![(0..channels, *order)],
        StreamKind::All(_) => Vec::new(),
        StreamKind::Groups(groups) => groups
            .iter()
            .filter_map(|(range, kind)| match kind {
                ChannelKind::Quaternion(order) => Some((range.clone(), *order)),
                _ => None,
            })
            .collect(),
    };
    for (range, order) in quaternions {
        let w = match order {
            QuaternionOrder::Xyzw => 3,
            QuaternionOrder::Wxyz => 0,
        };
        for first in range.step_by(4) {
            if let Some(at) = row.get_mut(first + w) {
                *at = 1.0;
            }
        }
    }
    row
}

/// [`neutral_row`] in the stream's dtype (its ones in float streams only).
fn write_neutral_row(info: &StreamInfo, row: &mut [u8]) {
    row.fill(0);
    let one: &[u8] = match info.dtype {
        DType::F16 => &[0x00, 0x3c],
        DType::BF16 => &[0x80, 0x3f],
        DType::F32 => &[0x00, 0x00, 0x80, 0x3f],
        DType::F64 => &[0, 0, 0, 0, 0, 0, 0xf0, 0x3f],
        _ => return,
    };
    for (c, value) in neutral_row(info).into_iter().enumerate() {
        if let Some(at) = row.get_mut(c * one.len()..(c + 1) * one.len()).filter(|_| value == 1.0) {
            at.copy_from_slice(one);
        }
    }
}

/// How one stream of a delta-window batch is read: video frames decoded
/// into their own buffers, other rows into the batch's upload at `data_at`,
/// the mask into it at `mask_at`.
struct DeltaPlan<'a> {
    name: &'a str,
    offsets: &'a [i64],
    video: Option<(usize, usize)>,
    image: Option<(usize, usize)>,
    data_at: Option<usize>,
    mask_at: usize,
}

/// Part `at` of an upload's tensors, taken once.
fn take_part(placed: &mut [Option<Tensor>], at: usize) -> Result<Tensor> {
    placed
        .get_mut(at)
        .and_then(Option::take)
        .ok_or_else(|| Error::Internal(format!("batch upload: part {at} taken twice or never made")))
}

fn empty_stream(device: &Device, name: &str, steps: usize) -> Result<BatchStream> {
    let data = Tensor::from_host_vec(device, HostVec::F32(Vec::new()), &[0, steps])?;
    BatchStream::with_host_mask(device, name, data, Vec::new(), [0, steps], MaskKind::Valid)
}

/// `(width, height)` (as [`Dataset::video_frame_size`]) of a stream of 8-bit RGB images (`u8 [H, W, 3]`
/// camera frames stored as images), which [`FrameOutput`] converts.
pub(crate) fn rgb_image_size(info: &StreamInfo) -> Option<(usize, usize)> {
    match info.step_shape[..] {
        [height, width, 3] if info.is_image() && info.dtype == DType::U8 => Some((width, height)),
        _ => None,
    }
}
