//! `sensor_msgs/PointCloud2` messages as the voxelizer's input: per message
//! its points' `x`, `y`, `z` and the fields asked for by name, each
//! converted to `f32` from whatever numeric type the cloud stores it in.
//!
//! A cloud is `height × width` points of `point_step` bytes (rows
//! `row_step` bytes apart); each field sits at its `offset` in a point with
//! its `datatype` (1 `INT8` … 8 `FLOAT64`, sensor_msgs/PointField) and the
//! cloud's byte order (`is_bigendian`). A field with `count > 1` gives its
//! first element. Points of a cloud that is not dense keep their NaN
//! coordinates: the voxelizer drops them (docs/semantics.md). Every offset
//! is checked against the message's bytes: a cloud whose fields, steps or
//! sizes do not fit its data is an error naming the bag, topic and message.

use std::path::Path;

use super::bag_file::RawMessage;
use super::cdr::{self, Value};
use super::msg_schema::MessageSchema;
use super::{bag_error, bags_at, open_bag, STOP};
use robocache_datasource::Result;
use robocache_storage::StorageOptions;

/// One `PointCloud2` message's points.
#[derive(Clone, Debug, PartialEq)]
pub struct PointCloud {
    /// The bag file it is from.
    pub file: std::path::PathBuf,
    /// Its log time (ns).
    pub log_time_ns: u64,
    /// Its `header.stamp` (ns).
    pub stamp_ns: i128,
    /// Its `header.frame_id`.
    pub frame_id: String,
    /// `x, y, z` of each point: `N × 3`.
    pub positions: Vec<f32>,
    /// The fields asked for, in their order, of each point: `N × F`.
    pub features: Vec<f32>,
}

impl PointCloud {
    /// Its number of points.
    pub fn len(&self) -> usize {
        self.positions.len() / 3
    }

    /// True for a cloud without points.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }
}

/// Where a field is in a point and how it is stored.
#[derive(Clone, Copy, Debug)]
struct FieldLayout {
    offset: usize,
    datatype: u8,
}

impl FieldLayout {
    fn size(self) -> usize {
        match self.datatype {
            1 | 2 => 1,
            3 | 4 => 2,
            5..=7 => 4,
            _ => 8,
        }
    }

    /// The field of the point starting at `point` as `f32`.
    fn read(self, bytes: &[u8], point: usize, big: bool) -> f32 {
        let at = point + self.offset;
        let word = |n: usize| -> [u8; 8] {
            let mut out = [0u8; 8];
            out[..n].copy_from_slice(&bytes[at..at + n]);
            if big {
                out[..n].reverse();
            }
            out
        };
        let w = word(self.size());
        match self.datatype {
            1 => w[0] as i8 as f32,
            2 => f32::from(w[0]),
            3 => f32::from(i16::from_le_bytes([w[0], w[1]])),
            4 => f32::from(u16::from_le_bytes([w[0], w[1]])),
            5 => i32::from_le_bytes([w[0], w[1], w[2], w[3]]) as f32,
            6 => u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as f32,
            7 => f32::from_le_bytes([w[0], w[1], w[2], w[3]]),
            _ => f64::from_le_bytes(w) as f32,
        }
    }
}

/// The clouds of `topic` in every bag at `path` (a bag file or a directory
/// of them, in path order), in each bag's order: `x`, `y`, `z` and the
/// fields named in `features`, as `f32`. A bag of a directory without the
/// topic gives none (a recording of other sensors); no bag with it is an
/// error naming the topic and path.
pub fn point_clouds(path: &Path, topic: &str, features: &[&str], storage: &StorageOptions) -> Result<Vec<PointCloud>> {
    let (storage, files) = bags_at(path, storage)?;
    let mut out = Vec::new();
    let mut found = false;
    for file in files {
        let bag = open_bag(&file, &storage)?;
        let Some(index) = bag.topics().iter().position(|t| t.name == topic) else { continue };
        found = true;
        let info = &bag.topics()[index];
        let schema = info.schema.as_ref().map_err(|p| bag_error(&file, Some(topic), None, p.clone()))?;
        let mut failure = None;
        let mut at = 0usize;
        let read = bag.read(&[index], &mut |message: RawMessage<'_>| {
            let number = at;
            at += 1;
            match cloud_of(schema, message.data, features) {
                Ok((stamp_ns, frame_id, positions, values)) => {
                    out.push(PointCloud {
                        file: file.clone(),
                        log_time_ns: message.log_ns,
                        stamp_ns,
                        frame_id,
                        positions,
                        features: values,
                    });
                    Ok(())
                }
                Err(problem) => {
                    failure = Some(bag_error(&file, Some(topic), Some(number), problem));
                    Err(STOP.into())
                }
            }
        });
        if let Some(error) = failure {
            return Err(error);
        }
        read.map_err(|p| bag_error(&file, Some(topic), None, p))?;
    }
    if !found {
        return Err(robocache_datasource::Error::Invalid(format!("{}: no bag has a topic `{topic}`", path.display())));
    }
    Ok(out)
}

/// One message's stamp, frame and points (see the module docs).
fn cloud_of(
    schema: &MessageSchema,
    bytes: &[u8],
    features: &[&str],
) -> std::result::Result<(i128, String, Vec<f32>, Vec<f32>), String> {
    let message = cdr::decode(schema, bytes)?;
    let number = |name: &str| -> std::result::Result<u64, String> {
        match message.get(schema, name) {
            Some(Value::UInt(v)) => Ok(*v),
            Some(Value::Int(v)) => u64::try_from(*v).map_err(|_| format!("`{name}` is {v}")),
            Some(Value::Bool(v)) => Ok(u64::from(*v)),
            _ => Err(format!("no `{name}`: not a sensor_msgs/PointCloud2")),
        }
    };
    let to_usize = |v: u64, name: &str| usize::try_from(v).map_err(|_| format!("`{name}` {v} is too large"));
    let (height, width) = (to_usize(number("height")?, "height")?, to_usize(number("width")?, "width")?);
    let point_step = to_usize(number("point_step")?, "point_step")?;
    let row_step = to_usize(number("row_step")?, "row_step")?;
    let big = number("is_bigendian")? != 0;
    let data: &[u8] = match message.get(schema, "data") {
        Some(Value::Bytes(data)) => data,
        _ => return Err("no `data` bytes: not a sensor_msgs/PointCloud2".into()),
    };
    let Some(Value::List(fields)) = message.get(schema, "fields") else {
        return Err("no `fields`: not a sensor_msgs/PointCloud2".into());
    };
    let mut layouts = std::collections::HashMap::new();
    for field in fields {
        let name = field.get(schema, "name").and_then(Value::as_str).unwrap_or_default();
        let offset = field.get(schema, "offset").and_then(Value::as_u64).unwrap_or(u64::MAX);
        let datatype = field.get(schema, "datatype").and_then(Value::as_u64).unwrap_or(0);
        if !(1..=8).contains(&datatype) {
            return Err(format!("field `{name}`: datatype {datatype} (sensor_msgs/PointField has 1..=8)"));
        }
        let layout = FieldLayout { offset: to_usize(offset, "offset")?, datatype: datatype as u8 };
        if layout.offset.checked_add(layout.size()).is_none_or(|end| end > point_step) {
            return Err(format!("field `{name}` at offset {offset} does not fit a point of {point_step} bytes"));
        }
        layouts.insert(name.to_owned(), layout);
    }
    let wanted: Vec<FieldLayout> = ["x", "y", "z"]
        .iter()
        .chain(features)
        .map(|name| {
            layouts.get(*name).copied().ok_or_else(|| {
                let mut have: Vec<&String> = layouts.keys().collect();
                have.sort();
                format!("no field `{name}` in the cloud (it has {have:?})")
            })
        })
        .collect::<std::result::Result<_, _>>()?;
    // Every row's points must lie in the data.
    if width > 0 && height > 0 {
        let row_bytes = width.checked_mul(point_step).ok_or("width × point_step overflows")?;
        let last_row = (height - 1).checked_mul(row_step).ok_or("height × row_step overflows")?;
        if last_row.checked_add(row_bytes).is_none_or(|end| end > data.len()) {
            return Err(format!(
                "{height} rows of {width} points of {point_step} bytes, {row_step} bytes apart, need more than its {} bytes",
                data.len()
            ));
        }
        if height > 1 && row_step < row_bytes {
            return Err(format!("row_step {row_step} is less than a row of {row_bytes} bytes"));
        }
    }
    let points = height * width;
    let mut positions = Vec::with_capacity(points * 3);
    let mut values = Vec::with_capacity(points * features.len());
    for row in 0..height {
        for column in 0..width {
            let point = row * row_step + column * point_step;
            positions.extend(wanted[..3].iter().map(|f| f.read(data, point, big)));
            values.extend(wanted[3..].iter().map(|f| f.read(data, point, big)));
        }
    }
    let stamp_ns = message.header_stamp_ns(schema).unwrap_or_default();
    let frame_id = message.get(schema, "header.frame_id").and_then(Value::as_str).unwrap_or_default().to_owned();
    Ok((stamp_ns, frame_id, positions, values))
}
