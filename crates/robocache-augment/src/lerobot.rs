//! LeRobot's `ImageTransformsConfig` (its dict, as `dataclasses.asdict`
//! or a training config's JSON gives it) as an [`Augment`].
//!
//! ```text
//! {"enable": true, "max_num_transforms": 3, "random_order": false,
//!  "tfs": {"brightness": {"weight": 1.0, "type": "ColorJitter", "kwargs": {"brightness": [0.8, 1.2]}}, ...}}
//! ```
//!
//! Transform types: `ColorJitter` (brightness, contrast, saturation, hue),
//! `SharpnessJitter` (sharpness), `RandomAffine` (degrees, translate, scale,
//! interpolation), `GaussianBlur` (kernel_size, sigma), `GaussianNoise`
//! (mean, sigma), `Identity`, and robocache's `Gamma` (gamma). A number
//! where a range is expected means what torchvision makes of it
//! (`brightness=0.2`: `[0.8, 1.2]`; `hue=0.05`: `[-0.05, 0.05]`;
//! `degrees=5`: `[-5, 5]`).

use serde_json::{Map, Value};

use crate::config::{Augment, Interpolation, RandomSubset, Range, Transform, Weighted};
use crate::error::{config, Result};

impl Augment {
    /// LeRobot's `ImageTransformsConfig` as a dict: `enable` false (its
    /// default) is no augmentation. Errors name the field
    /// (`tfs.hue.kwargs.hue`).
    pub fn from_lerobot(value: &Value) -> Result<Augment> {
        let root = object(value, "image_transforms")?;
        known_keys(root, "image_transforms", &["enable", "max_num_transforms", "random_order", "tfs"])?;
        if !boolean(root.get("enable"), "enable", false)? {
            return Ok(Augment::none());
        }
        let max_num_transforms = match root.get("max_num_transforms") {
            None => 3,
            Some(v) => v.as_u64().ok_or_else(|| config(format!("max_num_transforms: {v} is not a count")))? as usize,
        };
        let random_order = boolean(root.get("random_order"), "random_order", false)?;
        let tfs = match root.get("tfs") {
            None => return Ok(crate::presets::lerobot_default()),
            Some(tfs) => object(tfs, "tfs")?,
        };
        let mut transforms = Vec::new();
        for (name, tf) in tfs {
            let field = format!("tfs.{name}");
            let tf = object(tf, &field)?;
            known_keys(tf, &field, &["weight", "type", "kwargs"])?;
            let weight = match tf.get("weight") {
                None => 1.0,
                Some(w) => w.as_f64().ok_or_else(|| config(format!("{field}.weight: {w} is not a number")))?,
            };
            let kind = match tf.get("type") {
                None => "Identity",
                Some(t) => t.as_str().ok_or_else(|| config(format!("{field}.type: {t} is not a name")))?,
            };
            let empty = Map::new();
            let kwargs = match tf.get("kwargs") {
                None | Some(Value::Null) => &empty,
                Some(k) => object(k, &format!("{field}.kwargs"))?,
            };
            if weight <= 0.0 {
                continue; // LeRobot leaves it out
            }
            if let Some(transform) = transform(kind, kwargs, &format!("{field}.kwargs"))? {
                transforms.push(Weighted { name: name.clone(), weight, transform });
            }
        }
        let augment = Augment { crop: None, transforms: RandomSubset { transforms, max_num_transforms, random_order } };
        augment.check()?;
        Ok(augment)
    }
}

fn transform(kind: &str, kwargs: &Map<String, Value>, field: &str) -> Result<Option<Transform>> {
    let around_one = |key: &str| range_or(kwargs.get(key), &format!("{field}.{key}"), Range::around_one);
    let around_zero = |key: &str| range_or(kwargs.get(key), &format!("{field}.{key}"), |v| Range::new(-v, v));
    Ok(Some(match kind {
        "Identity" => return Ok(None),
        "ColorJitter" => {
            known_keys(kwargs, field, &["brightness", "contrast", "saturation", "hue"])?;
            let jitter = Transform::ColorJitter {
                brightness: around_one("brightness")?,
                contrast: around_one("contrast")?,
                saturation: around_one("saturation")?,
                hue: around_zero("hue")?,
            };
            // One factor: the plain operation (a permutation of one).
            match jitter {
                Transform::ColorJitter { brightness: Some(r), contrast: None, saturation: None, hue: None } => {
                    Transform::Brightness(r)
                }
                Transform::ColorJitter { brightness: None, contrast: Some(r), saturation: None, hue: None } => {
                    Transform::Contrast(r)
                }
                Transform::ColorJitter { brightness: None, contrast: None, saturation: Some(r), hue: None } => {
                    Transform::Saturation(r)
                }
                Transform::ColorJitter { brightness: None, contrast: None, saturation: None, hue: Some(r) } => {
                    Transform::Hue(r)
                }
                Transform::ColorJitter { brightness: None, contrast: None, saturation: None, hue: None } => {
                    return Ok(None)
                }
                other => other,
            }
        }
        "SharpnessJitter" => {
            known_keys(kwargs, field, &["sharpness"])?;
            match around_one("sharpness")? {
                Some(r) => Transform::Sharpness(r),
                None => return Err(config(format!("{field}.sharpness: missing"))),
            }
        }
        "Gamma" => {
            known_keys(kwargs, field, &["gamma"])?;
            match range_or(kwargs.get("gamma"), &format!("{field}.gamma"), Range::around_one)? {
                Some(r) => Transform::Gamma(r),
                None => return Err(config(format!("{field}.gamma: missing"))),
            }
        }
        "RandomAffine" => {
            known_keys(kwargs, field, &["degrees", "translate", "scale", "shear", "interpolation", "fill", "center"])?;
            for unsupported in ["shear", "center"] {
                if kwargs.get(unsupported).is_some_and(|v| !v.is_null()) {
                    return Err(config(format!("{field}.{unsupported}: not supported (robocache's affine has none)")));
                }
            }
            if kwargs.get("fill").is_some_and(|v| !(v.is_null() || v.as_f64() == Some(0.0))) {
                return Err(config(format!("{field}.fill: only 0 (black, torchvision's default) is supported")));
            }
            let degrees = around_zero("degrees")?.ok_or_else(|| config(format!("{field}.degrees: missing")))?;
            let translate = match kwargs.get("translate") {
                None | Some(Value::Null) => None,
                Some(v) => {
                    let pair = pair(v, &format!("{field}.translate"))?;
                    Some((pair.low, pair.high))
                }
            };
            let scale = match kwargs.get("scale") {
                None | Some(Value::Null) => None,
                Some(v) => Some(pair(v, &format!("{field}.scale"))?),
            };
            let interpolation = match kwargs.get("interpolation") {
                None | Some(Value::Null) => Interpolation::Nearest,
                Some(v) => match v.as_str().map(str::to_ascii_lowercase).as_deref() {
                    Some("nearest") | Some("interpolationmode.nearest") => Interpolation::Nearest,
                    Some("bilinear") | Some("interpolationmode.bilinear") => Interpolation::Bilinear,
                    _ => return Err(config(format!("{field}.interpolation: {v} is not nearest or bilinear"))),
                },
            };
            Transform::Affine { degrees, translate, scale, interpolation }
        }
        "GaussianBlur" => {
            known_keys(kwargs, field, &["kernel_size", "sigma"])?;
            let kernel = match kwargs.get("kernel_size") {
                Some(Value::Number(n)) => {
                    let k = n.as_u64().ok_or_else(|| config(format!("{field}.kernel_size: {n} is not a size")))?;
                    (k as usize, k as usize)
                }
                Some(v @ Value::Array(_)) => {
                    let p = pair(v, &format!("{field}.kernel_size"))?;
                    (p.low as usize, p.high as usize)
                }
                _ => return Err(config(format!("{field}.kernel_size: missing"))),
            };
            let sigma = range_or(kwargs.get("sigma"), &format!("{field}.sigma"), |v| Range::new(v, v))?
                .unwrap_or(Range::new(0.1, 2.0));
            Transform::GaussianBlur { kernel, sigma }
        }
        "GaussianNoise" => {
            known_keys(kwargs, field, &["mean", "sigma", "clip"])?;
            if kwargs.get("clip").is_some_and(|v| v != &Value::Bool(true)) {
                return Err(config(format!("{field}.clip: only true (torchvision's default) is supported")));
            }
            let number = |key: &str, default: f64| match kwargs.get(key) {
                None => Ok(default),
                Some(v) => v.as_f64().ok_or_else(|| config(format!("{field}.{key}: {v} is not a number"))),
            };
            Transform::GaussianNoise { mean: number("mean", 0.0)?, sigma: number("sigma", 0.1)? }
        }
        other => {
            return Err(config(format!(
                "{}: unknown transform type `{other}` (robocache applies ColorJitter, SharpnessJitter, RandomAffine, \
                 GaussianBlur, GaussianNoise, Gamma, Identity)",
                field.trim_end_matches(".kwargs")
            )))
        }
    }))
}

fn object<'a>(value: &'a Value, field: &str) -> Result<&'a Map<String, Value>> {
    value.as_object().ok_or_else(|| config(format!("{field}: {value} is not a dict")))
}

pub(crate) fn known_keys(map: &Map<String, Value>, field: &str, known: &[&str]) -> Result<()> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(config(format!("{field}.{key}: unknown field (known: {})", known.join(", ")))),
        None => Ok(()),
    }
}

fn boolean(value: Option<&Value>, field: &str, default: bool) -> Result<bool> {
    match value {
        None => Ok(default),
        Some(v) => v.as_bool().ok_or_else(|| config(format!("{field}: {v} is not true or false"))),
    }
}

pub(crate) fn pair(value: &Value, field: &str) -> Result<Range> {
    match value.as_array().map(Vec::as_slice) {
        Some([a, b]) => match (a.as_f64(), b.as_f64()) {
            (Some(low), Some(high)) => Ok(Range::new(low, high)),
            _ => Err(config(format!("{field}: {value} is not two numbers"))),
        },
        _ => Err(config(format!("{field}: {value} is not a pair of numbers"))),
    }
}

/// A range, or a number made one by `of_number`; absent or null: `None`.
fn range_or(value: Option<&Value>, field: &str, of_number: impl Fn(f64) -> Range) -> Result<Option<Range>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            let v = n.as_f64().ok_or_else(|| config(format!("{field}: {n} is not a number")))?;
            if v < 0.0 {
                return Err(config(format!("{field}: {v} is negative")));
            }
            Ok(Some(of_number(v)))
        }
        Some(v) => pair(v, field).map(Some),
    }
}
