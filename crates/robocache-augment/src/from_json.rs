//! An [`AugmentConfig`] from JSON, as Python's `augment=` gives it:
//!
//! - `"lerobot"`, `"act"`, `"openpi"`, `"groot"`, `"diffusion_policy"`: a
//!   [`preset`](crate::preset);
//! - LeRobot's `ImageTransformsConfig` as a dict (`enable`,
//!   `max_num_transforms`, `random_order`, `tfs`), optionally with a
//!   `crop`: `{"fraction": 0.95}`, `{"size": [height, width]}` or
//!   `{"scale": [0.08, 1.0], "ratio": [0.75, 1.33]}`, with `"output"`
//!   (`"crop"`, the default for fraction and size crops, `"frame"`, or
//!   `[height, width]`) and `"centre_in_evaluation"` (default true);
//! - per camera: `{"default": ..., "cameras": {"<stream>": ...},
//!   "same_across_cameras": false}`, each value one of the above or null
//!   (nothing).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::config::{Augment, AugmentConfig, Crop, CropOutput, CropSpec, Range};
use crate::error::{config, Result};
use crate::lerobot::{known_keys, pair};

impl AugmentConfig {
    /// The config `value` describes for a loader of `cameras` (see the
    /// module docs); errors name the field.
    pub fn from_json(value: &Value, cameras: &[&str]) -> Result<AugmentConfig> {
        let config = match value {
            Value::Object(map) if map.contains_key("default") || map.contains_key("cameras") => {
                known_keys(map, "augment", &["default", "cameras", "same_across_cameras"])?;
                let default = match map.get("default") {
                    None => Augment::none(),
                    Some(v) => one(v, "default", cameras, None)?,
                };
                let mut per_camera = BTreeMap::new();
                if let Some(c) = map.get("cameras") {
                    let c = c.as_object().ok_or_else(|| config(format!("cameras: {c} is not a dict")))?;
                    for (camera, v) in c {
                        per_camera.insert(camera.clone(), one(v, &format!("cameras.{camera}"), cameras, Some(camera))?);
                    }
                }
                let same_across_cameras = match map.get("same_across_cameras") {
                    None => false,
                    Some(v) => v.as_bool().ok_or_else(|| config(format!("same_across_cameras: {v} is not a bool")))?,
                };
                AugmentConfig { default, cameras: per_camera, same_across_cameras }
            }
            Value::String(name) => crate::preset(name, cameras)?,
            other => AugmentConfig::uniform(one(other, "augment", cameras, None)?),
        };
        config.check()?;
        Ok(config)
    }
}

/// One camera's augmentation: a preset's (its default, or the camera's
/// own), a LeRobot dict with an optional crop, or null.
fn one(value: &Value, field: &str, cameras: &[&str], camera: Option<&str>) -> Result<Augment> {
    match value {
        Value::Null => Ok(Augment::none()),
        Value::String(name) => {
            let preset = crate::preset(name, cameras).map_err(|e| config(format!("{field}: {e}")))?;
            Ok(camera.map_or(&preset.default, |c| preset.for_camera(c)).clone())
        }
        Value::Object(map) => {
            let mut lerobot = map.clone();
            let crop = lerobot.remove("crop");
            let mut augment = if lerobot.is_empty() {
                Augment::none()
            } else {
                // A dict given for augmentation means it: `enable` defaults to true here.
                lerobot.entry("enable").or_insert(Value::Bool(true));
                Augment::from_lerobot(&Value::Object(lerobot)).map_err(|e| config(format!("{field}: {e}")))?
            };
            if let Some(crop) = crop {
                augment.crop = Some(crop_spec(&crop, &format!("{field}.crop"))?);
            }
            Ok(augment)
        }
        other => Err(config(format!("{field}: {other} is not a preset name, a dict or null"))),
    }
}

fn crop_spec(value: &Value, field: &str) -> Result<CropSpec> {
    let map = value.as_object().ok_or_else(|| config(format!("{field}: {value} is not a dict")))?;
    known_keys(map, field, &["fraction", "size", "scale", "ratio", "output", "centre_in_evaluation"])?;
    let crop = match (map.get("fraction"), map.get("size"), map.get("scale")) {
        (Some(f), None, None) => {
            Crop::Fraction(f.as_f64().ok_or_else(|| config(format!("{field}.fraction: {f} is not a number")))?)
        }
        (None, Some(s), None) => {
            let (height, width) = size(s, &format!("{field}.size"))?;
            Crop::Size { width, height }
        }
        (None, None, Some(scale)) => {
            let scale = pair(scale, &format!("{field}.scale"))?;
            let ratio = match map.get("ratio") {
                None => Range::new(3.0 / 4.0, 4.0 / 3.0),
                Some(r) => pair(r, &format!("{field}.ratio"))?,
            };
            Crop::RandomResized { scale, ratio }
        }
        _ => return Err(config(format!("{field}: give one of fraction, size or scale (with ratio)"))),
    };
    let output = match map.get("output") {
        None if matches!(crop, Crop::RandomResized { .. }) => CropOutput::FrameSize,
        None => CropOutput::CropSize,
        Some(Value::String(s)) if s == "crop" => CropOutput::CropSize,
        Some(Value::String(s)) if s == "frame" => CropOutput::FrameSize,
        Some(v) => {
            let (height, width) = size(v, &format!("{field}.output"))?;
            CropOutput::Size { width, height }
        }
    };
    let centre_in_evaluation = match map.get("centre_in_evaluation") {
        None => true,
        Some(v) => v.as_bool().ok_or_else(|| config(format!("{field}.centre_in_evaluation: {v} is not a bool")))?,
    };
    Ok(CropSpec { crop, output, centre_in_evaluation })
}

/// `[height, width]`, both positive.
fn size(value: &Value, field: &str) -> Result<(usize, usize)> {
    match value.as_array().map(Vec::as_slice) {
        Some([h, w]) => match (h.as_u64(), w.as_u64()) {
            (Some(h), Some(w)) if h > 0 && w > 0 => Ok((h as usize, w as usize)),
            _ => Err(config(format!("{field}: {value} is not [height, width] in pixels"))),
        },
        _ => Err(config(format!("{field}: {value} is not [height, width]"))),
    }
}
