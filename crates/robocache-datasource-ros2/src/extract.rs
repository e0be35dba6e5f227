//! From decoded messages to a stream's rows: which numbers (field paths,
//! joints by name) or which frame, and the stream's dtype, shape and kind.
//! A [`StreamPlan`] is made once per dataset from the mapping and the first
//! message of its topic; every message of every bag is then extracted by it.

use robocache_cpu::{DType, QuaternionOrder};

use super::cdr::Value;
use super::mapping::{BagMapping, StreamMapping, TimeSource};
use super::msg_schema::{Arity, FieldType, MessageSchema, Primitive};
use robocache_datasource::model::{ChannelKind, StreamKind};

/// How a stream's rows come out of its topic's messages.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StreamPlan {
    pub(crate) key: String,
    pub(crate) topic: String,
    pub(crate) time: TimeSource,
    pub(crate) what: Extract,
    pub(crate) dtype: DType,
    pub(crate) step_shape: Vec<usize>,
    pub(crate) kind: StreamKind,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Extract {
    /// Every number under these paths, concatenated (`[]`: the message without its header).
    Numbers(Vec<String>),
    /// The values of `field` for these joints, matched by the `name` list.
    Joints { field: String, joints: Vec<String> },
    /// `sensor_msgs/CompressedImage`: PNG or JPEG bytes.
    CompressedImage,
    /// `sensor_msgs/Image`: raw pixels in its `encoding`.
    RawImage,
    /// `foxglove_msgs/CompressedVideo`: one H.264 access unit (Annex B) a
    /// message, decoded from the key frame before it.
    CompressedVideo,
    /// The child frame's pose in the parent frame through the tf tree
    /// (translation, quaternion xyzw), at each `/tf` message.
    Transform { parent: String, child: String },
}

/// One row of an image stream as the message holds it (decoded when read).
#[derive(Clone, Debug)]
pub(crate) enum Frame {
    Encoded(Vec<u8>),
    /// An H.264 or HEVC access unit: decoded with the ones before it.
    Video(robocache_video::Codec, Vec<u8>),
    Raw {
        encoding: String,
        height: usize,
        width: usize,
        step: usize,
        big_endian: bool,
        data: Vec<u8>,
    },
}

pub(crate) fn is_image_type(type_name: &str) -> Option<Extract> {
    match super::msg_schema::canonical_name(type_name).as_str() {
        "sensor_msgs/CompressedImage" => Some(Extract::CompressedImage),
        "sensor_msgs/Image" => Some(Extract::RawImage),
        "foxglove_msgs/CompressedVideo" => Some(Extract::CompressedVideo),
        _ => None,
    }
}

/// For a message of a `CompressedVideo` topic: whether it is a key frame
/// (`None` for other types, or a message that is not video robocache reads).
pub(crate) fn video_key_frame(type_name: &str, schema: &MessageSchema, message: &Value<'_>) -> Option<bool> {
    if is_image_type(type_name) != Some(Extract::CompressedVideo) {
        return None;
    }
    match frame(schema, message, &Extract::CompressedVideo) {
        Ok(Frame::Video(codec, unit)) => Some(robocache_video::is_key_frame(codec, &unit)),
        _ => None,
    }
}

/// The numbers of `what` in `message`; for joints, a joint missing from
/// the message is `NaN` here (the reader holds its last value).
pub(crate) fn numbers(
    schema: &MessageSchema,
    message: &Value<'_>,
    what: &Extract,
    out: &mut Vec<f64>,
) -> Result<(), String> {
    match what {
        Extract::Numbers(paths) if paths.is_empty() => {
            let Value::Struct(_, fields) = message else { return Err("not a message".into()) };
            for (field, value) in schema.root().fields.iter().zip(fields) {
                if field.name != "header" {
                    value.numbers(out);
                }
            }
        }
        Extract::Numbers(paths) => {
            for path in paths {
                message.get(schema, path).ok_or_else(|| format!("no field `{path}`"))?.numbers(out);
            }
        }
        Extract::Joints { field, joints } => {
            let names = message
                .get(schema, "name")
                .and_then(Value::strings)
                .ok_or("no `name` list of strings to match joints by")?;
            let mut values = Vec::new();
            message.get(schema, field).ok_or_else(|| format!("no field `{field}`"))?.numbers(&mut values);
            if values.len() != names.len() {
                return Err(format!("{} names but {} `{field}` values", names.len(), values.len()));
            }
            for joint in joints {
                out.push(names.iter().position(|n| n == joint).map_or(f64::NAN, |i| values[i]));
            }
        }
        Extract::CompressedImage | Extract::RawImage | Extract::CompressedVideo | Extract::Transform { .. } => {
            return Err("not a topic of numbers".into())
        }
    }
    Ok(())
}

/// The frame of an image message.
pub(crate) fn frame(schema: &MessageSchema, message: &Value<'_>, what: &Extract) -> Result<Frame, String> {
    let bytes = |name: &str| match message.get(schema, name) {
        Some(Value::Bytes(bytes)) => Ok(bytes.to_vec()),
        _ => Err(format!("no `{name}` bytes")),
    };
    let number = |name: &str| message.get(schema, name).and_then(Value::as_u64).ok_or_else(|| format!("no `{name}`"));
    match what {
        Extract::CompressedImage => Ok(Frame::Encoded(bytes("data")?)),
        Extract::CompressedVideo => match message.get(schema, "format").and_then(Value::as_str) {
            Some("h264") => Ok(Frame::Video(robocache_video::Codec::H264, bytes("data")?)),
            Some("h265" | "hevc") => Ok(Frame::Video(robocache_video::Codec::Hevc, bytes("data")?)),
            Some(other) => Err(format!("video format `{other}` (robocache reads h264 and h265)")),
            None => Err("no `format`".into()),
        },
        Extract::RawImage => Ok(Frame::Raw {
            encoding: message.get(schema, "encoding").and_then(Value::as_str).unwrap_or_default().to_owned(),
            height: number("height")? as usize,
            width: number("width")? as usize,
            step: number("step")? as usize,
            big_endian: number("is_bigendian")? != 0,
            data: bytes("data")?,
        }),
        _ => Err("not an image topic".into()),
    }
}

/// The dtype and per-pixel channels of a raw image encoding.
fn raw_layout(encoding: &str) -> Result<(DType, usize, usize), String> {
    // (dtype, channels kept, bytes per pixel in the message)
    Ok(match encoding {
        "rgb8" | "bgr8" => (DType::U8, 3, 3),
        "rgba8" | "bgra8" => (DType::U8, 3, 4),
        "mono8" | "8UC1" => (DType::U8, 1, 1),
        "mono16" | "16UC1" => (DType::U16, 1, 2),
        "32FC1" => (DType::F32, 1, 4),
        other => {
            return Err(format!(
                "image encoding `{other}` (robocache reads rgb8, bgr8, rgba8, bgra8, mono8, mono16, 16UC1, 32FC1)"
            ))
        }
    })
}

/// The dtype and `[H, W, C]` of an image stream, from its first frame.
pub(crate) fn frame_layout(frame: &Frame) -> Result<(DType, Vec<usize>), String> {
    match frame {
        Frame::Encoded(bytes) => {
            let decoded =
                image::load_from_memory(bytes).map_err(|e| format!("the first frame does not decode: {e}"))?;
            Ok((DType::U8, vec![decoded.height() as usize, decoded.width() as usize, 3]))
        }
        Frame::Raw { encoding, height, width, step, data, .. } => {
            // The size every frame of the stream is held to comes from this
            // one: checked against its own step and data, and the row limit.
            let (dtype, channels, pixel_bytes) = raw_layout(encoding)?;
            let shape = vec![*height, *width, channels];
            robocache_datasource::model::row_values(&shape).map_err(|e| format!("the first frame's shape {e}"))?;
            let row_bytes = width.checked_mul(pixel_bytes).ok_or("the first frame's width overflows")?;
            if *step < row_bytes || step.checked_mul(*height).is_none_or(|n| n > data.len()) {
                return Err(format!(
                    "the first frame says {height}x{width} {encoding} (rows of {row_bytes} bytes) in rows of step \
                     {step}, and holds {} bytes of data",
                    data.len()
                ));
            }
            Ok((dtype, shape))
        }
        Frame::Video(codec, unit) => {
            if !robocache_video::is_key_frame(*codec, unit) {
                return Err(
                    "the first message is not a key frame (an IDR or IRAP picture), so its size is unknown".into()
                );
            }
            let mut decoder = robocache_video::AnnexBDecoder::new(*codec).map_err(|e| e.to_string())?;
            let mut pictures = decoder.decode(0, unit).map_err(|e| format!("the first frame does not decode: {e}"))?;
            pictures.extend(decoder.finish().map_err(|e| format!("the first frame does not decode: {e}"))?);
            let (_, picture) = pictures.first().ok_or("the first frame gives no picture")?;
            Ok((DType::U8, vec![picture.height, picture.width, 3]))
        }
    }
}

/// Decodes video frames `wanted` (sorted, distinct indices) of `frames`
/// (access units in decode order) as YUV 4:2:0, in that order, each of
/// `shape` (`[H, W, 3]`), where `choice` says (the CPU, NVDEC); also the
/// units decoded, by where. Each frame decodes from the key frame at or
/// before it; a frame after the one before it in the same group of
/// pictures goes on from there, one with a key frame in between starts
/// again at that key frame (one decoder for the whole read).
pub(crate) fn decode_video_yuv(
    frames: &[Frame],
    wanted: &[usize],
    shape: &[usize],
    choice: robocache_video::DecoderChoice,
) -> Result<(Vec<robocache_video::Yuv420>, robocache_video::DecodeCounts), (usize, String)> {
    let unit = |at: usize| match frames.get(at) {
        Some(Frame::Video(codec, unit)) => Ok((*codec, unit.as_slice())),
        _ => Err((at, "not a video frame".to_owned())),
    };
    let mut counts = robocache_video::DecodeCounts::default();
    let Some(&first) = wanted.first() else { return Ok((Vec::new(), counts)) };
    let codec = unit(first)?.0;
    let mut pictures: Vec<Option<robocache_video::Yuv420>> = vec![None; wanted.len()];
    let mut keep = |decoded: Vec<(usize, robocache_video::Yuv420)>| -> Result<(), (usize, String)> {
        for (tag, picture) in decoded {
            let Ok(slot) = wanted.binary_search(&tag) else { continue };
            if [picture.height, picture.width, 3] != shape[..] {
                return Err((
                    tag,
                    format!("a {}x{} frame in a stream of {shape:?} frames", picture.height, picture.width),
                ));
            }
            pictures[slot] = Some(picture);
        }
        Ok(())
    };
    let (height, width) = (shape.first().copied().unwrap_or(0), shape.get(1).copied().unwrap_or(0));
    let mut decoder =
        robocache_video::AnnexBDecoder::with_choice(codec, width, height, choice).map_err(|e| match choice {
            robocache_video::DecoderChoice::Nvdec { device } => {
                (first, format!("NVDEC of GPU {device} (required): {e}"))
            }
            _ => (first, format!("no decoder: {e}")),
        })?;
    // The next unit the decoder takes (`None`: it holds no state yet).
    let mut next: Option<usize> = None;
    for &row in wanted {
        // The key frame at or before `row`, or the decoder's place where
        // no key frame lies between it and `row`.
        let mut key = row;
        while !robocache_video::is_key_frame(codec, unit(key)?.1) && next.is_none_or(|n| key > n) {
            if key == 0 {
                return Err((row, "no key frame (IDR picture) at or before it".into()));
            }
            key -= 1;
        }
        let start = match next {
            Some(n) if key <= n => n,
            Some(n) => {
                // A jump to a later group: the pictures held back first.
                keep(decoder.finish().map_err(|e| (n.saturating_sub(1), e.to_string()))?)?;
                key
            }
            None => key,
        };
        let mut at = start;
        while at <= row {
            let (this, bytes) = unit(at)?;
            if this != codec {
                return Err((at, format!("a {this:?} frame in a {codec:?} stream")));
            }
            let shown = wanted.binary_search(&at).is_ok();
            keep(decoder.decode_wanted(at, shown, bytes).map_err(|e| (at, e.to_string()))?)?;
            at += 1;
        }
        let units = (at - start) as u64;
        match decoder.is_nvdec() {
            true => counts.nvdec_samples += units,
            false => counts.cpu_samples += units,
        }
        next = Some(at);
    }
    keep(decoder.finish().map_err(|e| (next.unwrap_or(first).saturating_sub(1), e.to_string()))?)?;
    decoder.close();
    let mut out = Vec::with_capacity(wanted.len());
    for (picture, &row) in pictures.into_iter().zip(wanted) {
        out.push(picture.ok_or((row, "the decoder gave no picture for it".to_owned()))?);
    }
    Ok((out, counts))
}

/// Decodes `frame` into `out` (`dtype` `[H, W, C]` as `shape`).
pub(crate) fn decode_frame(frame: &Frame, dtype: DType, shape: &[usize], out: &mut [u8]) -> Result<(), String> {
    match frame {
        Frame::Video(..) => Err("a video frame decodes with the frames before it".into()),
        Frame::Encoded(bytes) => robocache_datasource::image_decode::decode_image(bytes, dtype, shape, out),
        Frame::Raw { encoding, height, width, step, big_endian, data } => {
            let (raw_dtype, channels, pixel_bytes) = raw_layout(encoding)?;
            if raw_dtype != dtype || [*height, *width, channels] != shape[..] {
                return Err(format!("a {height}x{width} {encoding} frame in a stream of {dtype} {shape:?} frames"));
            }
            let row_bytes = width.checked_mul(pixel_bytes).ok_or("the frame's width overflows")?;
            if *step < row_bytes || step.checked_mul(*height).is_none_or(|n| n > data.len()) {
                return Err(format!("{} bytes of data for {height} rows of step {step}", data.len()));
            }
            let size = dtype.size_in_bytes();
            let mut at = 0;
            for row in 0..*height {
                let line = &data[row * step..row * step + row_bytes];
                for pixel in line.chunks_exact(pixel_bytes) {
                    match encoding.as_str() {
                        "rgb8" | "rgba8" => out[at..at + 3].copy_from_slice(&pixel[..3]),
                        "bgr8" | "bgra8" => out[at..at + 3].copy_from_slice(&[pixel[2], pixel[1], pixel[0]]),
                        _ => {
                            let mut value = pixel[..size].to_vec();
                            if *big_endian == cfg!(target_endian = "little") && size > 1 {
                                value.reverse();
                            }
                            out[at..at + size].copy_from_slice(&value);
                        }
                    }
                    at += channels * size;
                }
            }
            Ok(())
        }
    }
}

/// The kind of every number `what` takes from `message`: quaternions
/// (`geometry_msgs/Quaternion`) as `quaternion-xyzw`, bools as `discrete`.
fn leaf_kinds(schema: &MessageSchema, message: &Value<'_>, what: &Extract) -> Vec<ChannelKind> {
    fn walk(schema: &MessageSchema, value: &Value<'_>, out: &mut Vec<ChannelKind>) {
        match value {
            Value::Struct(ty, fields) if schema.types[*ty].name == "geometry_msgs/Quaternion" && fields.len() == 4 => {
                out.extend([ChannelKind::Quaternion(QuaternionOrder::Xyzw); 4]);
            }
            Value::Struct(_, items) | Value::List(items) => items.iter().for_each(|v| walk(schema, v, out)),
            Value::Bool(_) => out.push(ChannelKind::Discrete),
            Value::Str(_) => {}
            Value::Bytes(bytes) => out.extend(std::iter::repeat_n(ChannelKind::Continuous, bytes.len())),
            Value::Int(_) | Value::UInt(_) | Value::Float(_) => out.push(ChannelKind::Continuous),
        }
    }
    let mut out = Vec::new();
    match what {
        Extract::Numbers(paths) if paths.is_empty() => {
            if let Value::Struct(_, fields) = message {
                for (field, value) in schema.root().fields.iter().zip(fields) {
                    if field.name != "header" {
                        walk(schema, value, &mut out);
                    }
                }
            }
        }
        Extract::Numbers(paths) => {
            for path in paths {
                if let Some(value) = message.get(schema, path) {
                    walk(schema, value, &mut out);
                }
            }
        }
        Extract::Joints { joints, .. } => out.resize(joints.len(), ChannelKind::Continuous),
        Extract::CompressedImage | Extract::RawImage | Extract::CompressedVideo | Extract::Transform { .. } => {}
    }
    out
}

/// Consecutive equal kinds as one group; one kind for the whole stream where it is.
fn stream_kind(kinds: &[ChannelKind]) -> StreamKind {
    let mut groups: Vec<(std::ops::Range<usize>, ChannelKind)> = Vec::new();
    for (i, kind) in kinds.iter().enumerate() {
        match groups.last_mut() {
            Some((range, last)) if last == kind => range.end = i + 1,
            _ => groups.push((i..i + 1, *kind)),
        }
    }
    match groups.as_slice() {
        [] => StreamKind::All(ChannelKind::Continuous),
        [(_, kind)] => StreamKind::All(*kind),
        _ => StreamKind::Groups(groups),
    }
}

/// The dtype a numeric stream is stored as: `float32` unless the mapping says `float64`.
fn float_dtype(mapping: &StreamMapping) -> DType {
    match mapping.dtype.as_deref() {
        Some("float64") => DType::F64,
        _ => DType::F32,
    }
}

/// The topic a transform stream is read at (its rows: one per message).
pub(crate) const TF_TOPIC: &str = "/tf";
/// The topic of transforms that hold for the whole recording.
pub(crate) const TF_STATIC_TOPIC: &str = "/tf_static";

/// The plan of a transform stream (`[parent, child]`).
pub(crate) fn transform_plan(key: &str, mapping: &StreamMapping, frames: &[String; 2]) -> Result<StreamPlan, String> {
    let kind: StreamKind = mapping.kind.as_deref().unwrap_or("0..3:continuous,3..7:quaternion-xyzw").parse()?;
    kind.check(7)?;
    let dtype = float_dtype(mapping);
    let [parent, child] = frames.clone().map(|f| f.trim_start_matches('/').to_owned());
    Ok(StreamPlan {
        key: key.into(),
        topic: TF_TOPIC.into(),
        time: mapping.time.unwrap_or(TimeSource::Log),
        what: Extract::Transform { parent, child },
        dtype,
        step_shape: vec![7],
        kind,
    })
}

/// The plan of one mapped stream, from its topic's schema and first message.
pub(crate) fn plan(
    key: &str,
    mapping: &StreamMapping,
    type_name: &str,
    schema: &MessageSchema,
    first: &Value<'_>,
) -> Result<StreamPlan, String> {
    let time = mapping.time.unwrap_or(if schema.has_header() { TimeSource::Header } else { TimeSource::Log });
    if time == TimeSource::Header && !schema.has_header() {
        return Err(format!("`time = \"header\"`, but `{type_name}` has no std_msgs/Header `header`"));
    }
    let paths = BagMapping::paths(mapping);
    let image = is_image_type(type_name).filter(|_| paths.is_empty() && mapping.joints.is_empty());
    if let Some(what) = image {
        let frame = frame(schema, first, &what)?;
        let (dtype, step_shape) = frame_layout(&frame)?;
        let kind = match &mapping.kind {
            Some(kind) => kind.parse()?,
            None => StreamKind::All(ChannelKind::Image),
        };
        return Ok(StreamPlan { key: key.into(), topic: mapping.topic.clone(), time, what, dtype, step_shape, kind });
    }
    let what = if mapping.joints.is_empty() {
        Extract::Numbers(paths)
    } else {
        let [field] = paths.as_slice() else {
            return Err("`joints` takes one `field` (`position`, `velocity`, `effort`)".into());
        };
        Extract::Joints { field: field.clone(), joints: mapping.joints.clone() }
    };
    let mut values = Vec::new();
    numbers(schema, first, &what, &mut values)?;
    if values.is_empty() {
        return Err("its first message has no numbers there".into());
    }
    let kind = match &mapping.kind {
        Some(kind) => kind.parse()?,
        None => stream_kind(&leaf_kinds(schema, first, &what)),
    };
    kind.check(values.len())?;
    let dtype = float_dtype(mapping);
    Ok(StreamPlan {
        key: key.into(),
        topic: mapping.topic.clone(),
        time,
        what,
        dtype,
        step_shape: vec![values.len()],
        kind,
    })
}

/// The default mapping of one topic: image topics as one stream; else one
/// stream per top-level numeric field (not the header, covariances or
/// strings; a sequence of numbers where its first message has some);
/// JointState-like fields by the first message's joint names.
pub(crate) fn default_streams(topic: &str, schema: &MessageSchema, first: &Value<'_>) -> Vec<(String, StreamMapping)> {
    let base = topic.trim_start_matches('/').to_owned();
    let mapping = |field: Option<String>, joints: Vec<String>| StreamMapping {
        topic: topic.to_owned(),
        transform: None,
        field,
        fields: Vec::new(),
        joints,
        kind: None,
        time: None,
        dtype: None,
    };
    if is_image_type(&schema.root().name).is_some() {
        return vec![(base, mapping(None, Vec::new()))];
    }
    let names = first
        .get(schema, "name")
        .and_then(Value::strings)
        .map(|n| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
    let mut out = Vec::new();
    for field in &schema.root().fields {
        if field.name == "header" || field.name.ends_with("covariance") || field.name == "layout" {
            continue;
        }
        let numeric = match &field.ty {
            FieldType::Primitive(Primitive::String | Primitive::WString) => false,
            FieldType::Primitive(_) => true,
            // A message: numbers only where it holds no sequences.
            FieldType::Message(inner) => field.arity != Arity::Sequence(None) && schema.is_fixed_numeric(*inner),
        };
        if !numeric || matches!(field.arity, Arity::Sequence(_)) && matches!(field.ty, FieldType::Message(_)) {
            continue;
        }
        let mut values = Vec::new();
        if let Some(value) = first.get(schema, &field.name) {
            value.numbers(&mut values);
        }
        if values.is_empty() {
            continue;
        }
        let joints = match (&names, field.arity) {
            (Some(names), Arity::Sequence(_)) if names.len() == values.len() => names.clone(),
            _ => Vec::new(),
        };
        out.push((format!("{base}/{}", field.name), mapping(Some(field.name.clone()), joints)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_image_whose_size_its_data_does_not_hold_is_refused_before_it_sizes_anything() {
        let raw = |height, width, step, data: usize| Frame::Raw {
            encoding: "rgb8".into(),
            height,
            width,
            step,
            big_endian: false,
            data: vec![7u8; data],
        };
        assert_eq!(frame_layout(&raw(2, 3, 9, 18)).unwrap(), (DType::U8, vec![2, 3, 3]));
        for (frame, why) in [
            (raw(1000, 1000, 3000, 64), "holds 64 bytes"),
            (raw(2, 3, 8, 18), "step 8"),
            (raw(1 << 20, 1 << 20, 3 << 20, 1 << 10), "not 1 to"),
            (raw(usize::MAX, 2, 6, 12), "not 1 to"),
        ] {
            let error = frame_layout(&frame).unwrap_err();
            assert!(error.contains(why), "{why}: {error}");
        }
    }
}
