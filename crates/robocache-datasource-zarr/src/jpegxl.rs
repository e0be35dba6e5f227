//! Zarr format 2 arrays of JPEG XL frames, as imagecodecs' numcodecs codec
//! writes them (`"compressor": {"id": "imagecodecs_jpegxl", ...}`: UMI's
//! cameras, one `[1, H, W, C]` frame a chunk). zarrs knows no such codec,
//! so the metadata is read here and each chunk decoded by jxl-oxide.

use robocache_cpu::DType;
use robocache_datasource::model::row_values;
use robocache_datasource::{Error, Result};
use serde_json::Value;

use crate::store::ZarrStore;

/// imagecodecs' codec id.
pub const CODEC_ID: &str = "imagecodecs_jpegxl";

/// A camera of JPEG XL frames, one a chunk.
#[derive(Clone, Debug)]
pub struct JpegXlArray {
    /// The array's key (`data/camera0_rgb`).
    pub key: String,
    /// Frames.
    pub len: usize,
    /// `[H, W, C]`.
    pub frame_shape: Vec<usize>,
    /// The chunk key's separator (`.` or `/`).
    separator: String,
}

impl JpegXlArray {
    /// The array at `key` when its `.zarray` names imagecodecs' JPEG XL
    /// codec; `None` for other arrays (zarrs reads them).
    pub fn open(store: &ZarrStore, key: &str) -> Result<Option<Self>> {
        let meta_key = format!("{key}/.zarray");
        let Some(bytes) = store.read(&meta_key)? else { return Ok(None) };
        let layout =
            |problem: String| Error::Layout { file: store.path().to_path_buf(), path: meta_key.clone(), problem };
        let meta: Value = serde_json::from_slice(&bytes).map_err(|e| layout(format!("is not JSON: {e}")))?;
        if meta.pointer("/compressor/id").and_then(Value::as_str) != Some(CODEC_ID) {
            return Ok(None);
        }
        let dims = |name: &str| -> Result<Vec<usize>> {
            meta.get(name)
                .and_then(Value::as_array)
                .and_then(|a| a.iter().map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok())).collect())
                .ok_or_else(|| layout(format!("`{name}` is not a list of sizes")))
        };
        let (shape, chunks) = (dims("shape")?, dims("chunks")?);
        if meta.get("dtype").and_then(Value::as_str) != Some("|u1") {
            return Err(layout(format!(
                "JPEG XL frames must be `|u1`, not {}",
                meta.get("dtype").unwrap_or(&Value::Null)
            )));
        }
        if !meta.get("filters").is_none_or(Value::is_null) {
            return Err(layout("JPEG XL frames with filters are not read".into()));
        }
        let [len, height, width, channels] = shape[..] else {
            return Err(layout(format!("JPEG XL frames must be [N, H, W, C], not {shape:?}")));
        };
        if chunks != [1, height, width, channels] {
            return Err(layout(format!(
                "robocache reads JPEG XL frames of one frame a chunk ([1, {height}, {width}, {channels}]), not chunks {chunks:?}"
            )));
        }
        if !(1..=4).contains(&channels) {
            return Err(layout(format!("JPEG XL frames of {channels} channels are not read (1 to 4)")));
        }
        row_values(&[height, width, channels]).map_err(|problem| layout(format!("a frame {problem}")))?;
        let separator = meta.get("dimension_separator").and_then(Value::as_str).unwrap_or(".").to_owned();
        if separator != "." && separator != "/" {
            return Err(layout(format!("dimension_separator `{separator}` is not `.` or `/`")));
        }
        Ok(Some(JpegXlArray { key: key.to_owned(), len, frame_shape: vec![height, width, channels], separator }))
    }

    /// The element type (bytes).
    pub fn dtype(&self) -> DType {
        DType::U8
    }

    /// Bytes of one frame.
    pub fn frame_bytes(&self) -> usize {
        self.frame_shape.iter().product()
    }

    /// Frame `row` decoded into `out` (`[H, W, C]` bytes); a missing chunk
    /// is the fill value, zeros, as zarr-python reads it.
    pub fn read_frame(&self, store: &ZarrStore, row: usize, out: &mut [u8]) -> Result<()> {
        let s = &self.separator;
        let chunk_key = format!("{}/{row}{s}0{s}0{s}0", self.key);
        let Some(bytes) = store.read(&chunk_key)? else {
            out.fill(0);
            return Ok(());
        };
        decode(&bytes, &self.frame_shape, out).map_err(|problem| Error::Layout {
            file: store.path().to_path_buf(),
            path: chunk_key,
            problem: format!("JPEG XL chunk: {problem}"),
        })
    }
}

/// A JPEG XL image into `[H, W, C]` 8-bit samples, checked against the
/// shape the array declares.
fn decode(bytes: &[u8], shape: &[usize], out: &mut [u8]) -> std::result::Result<(), String> {
    let image =
        jxl_oxide::JxlImage::builder().read(bytes).map_err(|e| format!("{} bytes do not decode: {e}", bytes.len()))?;
    let (height, width, channels) = (shape[0], shape[1], shape[2]);
    if (image.height() as usize, image.width() as usize) != (height, width) {
        return Err(format!(
            "the image is {}x{} (HxW), the array declares {height}x{width}",
            image.height(),
            image.width()
        ));
    }
    let render = image.render_frame(0).map_err(|e| format!("does not render: {e}"))?;
    let mut stream = render.stream();
    if stream.channels() as usize != channels {
        return Err(format!("the image has {} channels, the array declares {channels}", stream.channels()));
    }
    if out.len() != height * width * channels {
        return Err(format!("{} bytes asked for a frame of {}", out.len(), height * width * channels));
    }
    let written = stream.write_to_buffer(out);
    if written != out.len() {
        return Err(format!("decoded {written} samples, expected {}", out.len()));
    }
    Ok(())
}
