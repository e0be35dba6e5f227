//! A grid of a dataset's camera frames under sampled augmentations, to look
//! at before a long run ([`preview_grid`]; `robocache augment-preview` and
//! `robocache.augment_preview` write it as a PNG).

use std::sync::Arc;

use robocache_augment::{AugmentConfig, FrameAugment, SampleKey};
use robocache_datasets::{Dataset, DeltaTimestamps, StepWindowSpec};

use crate::loader::{Loader, LoaderConfig, WindowSpec};
use crate::{Device, Error, FrameLayout, FrameOutput, Result};

/// What a preview shows.
#[derive(Clone, Debug)]
pub struct PreviewRequest {
    /// The camera stream (`None`: the dataset's first camera).
    pub camera: Option<String>,
    /// Frames (rows of the grid), spread evenly over the dataset's windows.
    pub samples: usize,
    /// Augmentations drawn per frame (columns after the original and the
    /// evaluation transform).
    pub draws: usize,
    pub seed: u64,
    /// What frames become before augmentation (the loader's `frames`).
    pub frames: FrameOutput,
}

/// An 8-bit RGB image `[height, width, 3]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreviewGrid {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<u8>,
    /// The camera shown.
    pub camera: String,
}

impl PreviewGrid {
    /// Writes it as a PNG file.
    pub fn save_png(&self, path: &std::path::Path) -> Result<()> {
        let problem = |problem: String| Error::Augment(robocache_augment::Error::Frames(problem));
        let image = image::RgbImage::from_raw(self.width as u32, self.height as u32, self.pixels.clone())
            .ok_or_else(|| problem(format!("a {}x{} grid of {} bytes", self.width, self.height, self.pixels.len())))?;
        image.save(path).map_err(|e| problem(format!("writing {}: {e}", path.display())))
    }
}

/// Pixels between cells (black).
const GAP: usize = 4;

/// Rows of `request.samples` frames of `dataset`'s camera: each the frame as
/// the loader gives it without augmentation, under the evaluation
/// transform, then under `request.draws` training draws of `config`
/// (epochs `0..draws` of the loader's seed), on the CPU; cells of
/// different sizes are placed top left in cells of the largest.
pub fn preview_grid(dataset: Arc<Dataset>, config: &AugmentConfig, request: &PreviewRequest) -> Result<PreviewGrid> {
    config.check()?;
    let camera = match &request.camera {
        Some(camera) => camera.clone(),
        None => first_camera(&dataset)?,
    };
    let video = dataset.video_frame_size(&camera).is_some();
    let windows = match video {
        true => WindowSpec::Deltas(DeltaTimestamps::new(vec![(camera.clone(), vec![0.0])])),
        false => WindowSpec::Steps(StepWindowSpec::default()),
    };
    let frames = FrameOutput { layout: FrameLayout::Hwc, dtype: crate::FrameDType::U8, ..request.frames };
    let device = Device::cpu();
    let loader = Loader::new(
        &device,
        dataset,
        LoaderConfig { frames, shuffle: false, ..LoaderConfig::new(&[camera.as_str()], windows, 1) },
    )?;
    let total = loader.windows();
    if total == 0 || request.samples == 0 {
        return Err(Error::Augment(robocache_augment::Error::Frames(format!(
            "no frames to preview ({total} windows, {} samples asked for)",
            request.samples
        ))));
    }
    let picks: Vec<usize> = (0..request.samples.min(total)).map(|i| i * total / request.samples.min(total)).collect();
    let batch = loader.batch(&picks)?;
    let data =
        &batch.stream(&camera).ok_or_else(|| Error::Internal(format!("no stream `{camera}` in the batch")))?.data;
    let shape = data.shape().to_vec();
    let (height, width) = (shape[shape.len() - 3], shape[shape.len() - 2]);
    // The frames' levels, read once; each cell augments its frame alone.
    let levels = data.to_vec::<u8>()?;
    let frame_len = width * height * 3;
    let augment = config.for_camera(&camera);
    let mut columns: Vec<Vec<FrameAugment>> = vec![vec![FrameAugment::default(); picks.len()]];
    columns.push(vec![augment.evaluation().parameters((width, height)); picks.len()]);
    for draw in 0..request.draws as u64 {
        columns.push(
            picks
                .iter()
                .map(|&sample| {
                    let key = SampleKey { seed: request.seed, epoch: draw, sample: sample as u64, camera: 0 };
                    augment.draw(key, (width, height))
                })
                .collect(),
        );
    }
    let mut cells = Vec::with_capacity(columns.len());
    for params in &columns {
        // One launch per cell: draws of random resized crops differ in size.
        let mut column = Vec::with_capacity(picks.len());
        for (row, p) in params.iter().enumerate() {
            let one = crate::Tensor::from_slice(
                &device,
                &levels[row * frame_len..(row + 1) * frame_len],
                &[1, height, width, 3],
            )?;
            let out = device.augment_frames(&one, FrameLayout::Hwc, 1, std::slice::from_ref(p))?;
            let s = out.shape().to_vec();
            column.push((s[2], s[1], out.to_vec::<u8>()?));
        }
        cells.push(column);
    }
    let cell_w = cells.iter().flatten().map(|c| c.0).max().unwrap_or(0);
    let cell_h = cells.iter().flatten().map(|c| c.1).max().unwrap_or(0);
    let grid_w = cells.len() * (cell_w + GAP) - GAP;
    let grid_h = picks.len() * (cell_h + GAP) - GAP;
    let mut pixels = vec![0u8; grid_w * grid_h * 3];
    for (col, column) in cells.iter().enumerate() {
        for (row, (w, h, values)) in column.iter().enumerate() {
            let (x0, y0) = (col * (cell_w + GAP), row * (cell_h + GAP));
            for y in 0..*h {
                let to = ((y0 + y) * grid_w + x0) * 3;
                pixels[to..to + w * 3].copy_from_slice(&values[y * w * 3..(y + 1) * w * 3]);
            }
        }
    }
    Ok(PreviewGrid { width: grid_w, height: grid_h, pixels, camera })
}

/// The dataset's first camera stream (video or 8-bit RGB images).
fn first_camera(dataset: &Dataset) -> Result<String> {
    let info = dataset.info();
    let episode = info
        .episodes
        .first()
        .ok_or_else(|| Error::Augment(robocache_augment::Error::Frames("the dataset has no episodes".into())))?;
    episode
        .streams
        .iter()
        .find(|s| dataset.video_frame_size(&s.name).is_some() || crate::windows::rgb_image_size(s).is_some())
        .map(|s| s.name.clone())
        .ok_or_else(|| {
            Error::Augment(robocache_augment::Error::Frames(
                "the dataset has no camera stream (video, or 8-bit RGB images [H, W, 3])".into(),
            ))
        })
}
