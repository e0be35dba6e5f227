//! `features.json`: TFDS's description of every feature (the
//! `FeaturesDict` proto written as JSON), flattened into the leaves a
//! `tf.train.Example` holds, keyed as TFDS flattens them
//! (`steps/observation/image`, `episode_metadata/file_path`).
//!
//! ```text
//! {"featuresDict": {"features": {
//!   "steps": {"sequence": {"feature": {"featuresDict": {"features": {
//!       "action": {"tensor": {"shape": {"dimensions": ["7"]}, "dtype": "float32", "encoding": "none"}},
//!       "observation": {"featuresDict": {"features": {
//!           "image": {"image": {"shape": {"dimensions": ["256", "256", "3"]}, "dtype": "uint8", "encodingFormat": "jpeg"}}}}},
//!       "language_instruction": {"text": {}}}}}, "length": "-1"}},
//!   "episode_metadata": {"featuresDict": {"features": {"file_path": {"text": {}}}}}}}}
//! ```

use std::path::Path;

use robocache_cpu::DType;
use serde_json::Value;

use robocache_datasource::{Error, Result};

/// The top-level sequence whose leaves are per-step streams (RLDS).
pub const STEPS: &str = "steps";

/// How a tensor's values are stored in the Example.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorEncoding {
    /// `int64_list` (integers and bools) or `float_list` (floats, f64 narrowed to f32).
    None,
    /// One `bytes_list` entry per value: the raw little-endian elements.
    Bytes,
    /// As `Bytes`, compressed with zlib.
    Zlib,
}

/// What one leaf holds.
#[derive(Clone, Debug, PartialEq)]
pub enum LeafKind {
    /// `tfds.features.Tensor`, `Scalar`, `ClassLabel`.
    Tensor { dtype: DType, shape: Vec<usize>, encoding: TensorEncoding },
    /// `tfds.features.Image`: encoded PNG or JPEG bytes, one per value.
    /// `u8`/`u16` `[H, W, C]`, or `f32 [H, W, 1]` stored as 4-channel PNG.
    Image { dtype: DType, shape: Vec<usize>, format: Option<String> },
    /// `tfds.features.Text`: UTF-8 bytes, one per value.
    Text,
}

impl LeafKind {
    /// The dtype and per-value shape of a numeric or image leaf.
    pub fn array(&self) -> Option<(DType, &[usize])> {
        match self {
            LeafKind::Tensor { dtype, shape, .. } | LeafKind::Image { dtype, shape, .. } => Some((*dtype, shape)),
            LeafKind::Text => None,
        }
    }
}

/// One leaf of `features.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct Leaf {
    /// The key in the Example (`steps/observation/image`).
    pub key: String,
    /// True under the `steps` sequence: the Example holds every step's values concatenated.
    pub per_step: bool,
    pub kind: LeafKind,
}

impl Leaf {
    /// The stream name: the key without `steps/`.
    pub fn stream_name(&self) -> &str {
        self.key.strip_prefix("steps/").unwrap_or(&self.key)
    }
}

/// The leaves robocache reads, and those it skips with the reason.
#[derive(Clone, Debug, Default)]
pub struct Features {
    pub leaves: Vec<Leaf>,
    pub skipped: Vec<(String, String)>,
}

impl Features {
    /// Parses the `features.json` at `path`.
    pub fn read(path: &Path, storage: &robocache_storage::Storage) -> Result<Features> {
        let text = storage.read_to_string(path)?;
        let json: Value = serde_json::from_str(&text).map_err(|e| layout(path, "", format!("is not JSON: {e}")))?;
        Features::parse(path, &json)
    }

    pub(crate) fn parse(path: &Path, json: &Value) -> Result<Features> {
        let Some(top) = json.pointer("/featuresDict/features").and_then(Value::as_object) else {
            let hint = if json.get("content").is_some() {
                " (this is the legacy features.json of TFDS before 4.0; regenerate the dataset with a newer TFDS)"
            } else {
                ""
            };
            return Err(layout(path, "featuresDict", format!("has no `featuresDict.features` object{hint}")));
        };
        if !top.contains_key(STEPS) {
            return Err(layout(
                path,
                STEPS,
                format!(
                    "is missing: an RLDS dataset has a `steps` sequence (features: {})",
                    top.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        let mut features = Features::default();
        // Sorted by key, whatever order the JSON map keeps (serde_json's
        // `preserve_order` is on in builds that hold zarrs).
        for (name, feature) in sorted(top) {
            if name == STEPS {
                let Some(inner) = feature.pointer("/sequence/feature") else {
                    return Err(layout(path, STEPS, "is not a sequence (`tfds.features.Dataset`)".into()));
                };
                features.walk(path, inner, STEPS, true)?;
            } else {
                features.walk(path, feature, name, false)?;
            }
        }
        Ok(features)
    }

    fn walk(&mut self, path: &Path, feature: &Value, key: &str, per_step: bool) -> Result<()> {
        if let Some(children) = feature.pointer("/featuresDict/features").and_then(Value::as_object) {
            for (name, child) in sorted(children) {
                self.walk(path, child, &format!("{key}/{name}"), per_step)?;
            }
            return Ok(());
        }
        let kind = if let Some(tensor) = feature.get("tensor") {
            let dtype = dtype(path, key, tensor)?;
            let shape = shape(path, key, tensor)?;
            let encoding = match tensor.get("encoding").and_then(Value::as_str).unwrap_or("none") {
                "none" | "" => TensorEncoding::None,
                "bytes" => TensorEncoding::Bytes,
                "zlib" => TensorEncoding::Zlib,
                other => return Err(layout(path, key, format!("unknown tensor encoding `{other}`"))),
            };
            match (dtype, shape) {
                (Some(dtype), Some(shape)) => LeafKind::Tensor { dtype, shape, encoding },
                (None, _) => return self.skip(key, "string tensor"),
                (_, None) => return self.skip(key, "dynamic shape"),
            }
        } else if let Some(image) = feature.get("image") {
            let dtype = dtype(path, key, image)?.unwrap_or(DType::U8);
            let Some(shape) = shape(path, key, image)? else { return self.skip(key, "image of dynamic size") };
            let format = image.get("encodingFormat").and_then(Value::as_str).filter(|s| !s.is_empty());
            let valid = match dtype {
                DType::U8 | DType::U16 => shape.len() == 3 && matches!(shape[2], 1 | 3 | 4),
                DType::F32 => shape.len() == 3 && shape[2] == 1,
                _ => false,
            };
            if !valid {
                return Err(layout(
                    path,
                    key,
                    format!(
                        "image of dtype {} and shape {shape:?}: robocache reads u8/u16 [H, W, 1|3|4] and f32 [H, W, 1]",
                        dtype.name()
                    ),
                ));
            }
            LeafKind::Image { dtype, shape, format: format.map(str::to_owned) }
        } else if feature.get("text").is_some() {
            LeafKind::Text
        } else if feature.get("classLabel").is_some() {
            LeafKind::Tensor { dtype: DType::I64, shape: Vec::new(), encoding: TensorEncoding::None }
        } else {
            let class = feature.get("pythonClassName").and_then(Value::as_str).unwrap_or("an unknown feature");
            return self.skip(key, class);
        };
        self.leaves.push(Leaf { key: key.to_owned(), per_step, kind });
        Ok(())
    }

    fn skip(&mut self, key: &str, why: &str) -> Result<()> {
        tracing::warn!(key, why, "features.json: feature skipped");
        self.skipped.push((key.to_owned(), why.to_owned()));
        Ok(())
    }
}

/// The dtype of a tensor or image; `None` for strings.
fn dtype(path: &Path, key: &str, spec: &Value) -> Result<Option<DType>> {
    let name = spec.get("dtype").and_then(Value::as_str).unwrap_or("");
    Ok(Some(match name {
        "bool" => DType::Bool,
        "uint8" => DType::U8,
        "uint16" => DType::U16,
        "uint32" => DType::U32,
        "uint64" => DType::U64,
        "int8" => DType::I8,
        "int16" => DType::I16,
        "int32" => DType::I32,
        "int64" => DType::I64,
        "float16" => DType::F16,
        "bfloat16" => DType::BF16,
        "float32" => DType::F32,
        "float64" => DType::F64,
        "" | "string" | "object" => return Ok(None),
        other => return Err(layout(path, key, format!("unknown dtype `{other}`"))),
    }))
}

/// The static shape of a tensor or image; `None` when a dimension is dynamic.
fn shape(path: &Path, key: &str, spec: &Value) -> Result<Option<Vec<usize>>> {
    let Some(dimensions) = spec.pointer("/shape/dimensions") else { return Ok(Some(Vec::new())) };
    let Some(dimensions) = dimensions.as_array() else {
        return Err(layout(path, key, "shape.dimensions is not a list".into()));
    };
    let mut shape = Vec::with_capacity(dimensions.len());
    for d in dimensions {
        let value = match d {
            Value::String(s) => s.parse::<i64>().ok(),
            Value::Number(n) => n.as_i64(),
            _ => None,
        };
        match value {
            Some(v) if v >= 0 => shape.push(v as usize),
            Some(_) => return Ok(None),
            None => return Err(layout(path, key, format!("shape dimension {d} is not an integer"))),
        }
    }
    robocache_datasource::model::row_values(&shape).map_err(|problem| layout(path, key, format!("shape {problem}")))?;
    Ok(Some(shape))
}

fn layout(path: &Path, key: &str, problem: String) -> Error {
    Error::Layout { file: path.to_path_buf(), path: key.to_owned(), problem }
}

/// A JSON object's entries in key order.
fn sorted(object: &serde_json::Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<_> = object.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn nested_dicts_flatten_into_example_keys() {
        let json = json!({"featuresDict": {"features": {
            "steps": {"sequence": {"length": "-1", "feature": {"featuresDict": {"features": {
                "action": {"featuresDict": {"features": {
                    "world_vector": {"tensor": {"shape": {"dimensions": ["3"]}, "dtype": "float32", "encoding": "none"}}}}},
                "observation": {"featuresDict": {"features": {
                    "image": {"image": {"shape": {"dimensions": ["4", "6", "3"]}, "dtype": "uint8", "encodingFormat": "jpeg"}},
                    "ragged": {"tensor": {"shape": {"dimensions": ["-1"]}, "dtype": "float32"}}}}},
                "is_first": {"tensor": {"shape": {}, "dtype": "bool", "encoding": "none"}},
                "language_instruction": {"text": {}}}}}}},
            "episode_metadata": {"featuresDict": {"features": {"file_path": {"text": {}}}}}}}});
        let features = Features::parse(Path::new("features.json"), &json).unwrap();
        let keys: Vec<_> = features.leaves.iter().map(|l| (l.key.as_str(), l.per_step)).collect();
        assert_eq!(
            keys,
            [
                ("episode_metadata/file_path", false),
                ("steps/action/world_vector", true),
                ("steps/is_first", true),
                ("steps/language_instruction", true),
                ("steps/observation/image", true),
            ],
            "leaves in key order, as features.json lists them"
        );
        assert_eq!(features.skipped, [("steps/observation/ragged".to_owned(), "dynamic shape".to_owned())]);
        assert_eq!(features.leaves[4].kind.array(), Some((DType::U8, &[4usize, 6, 3][..])));
        assert_eq!(features.leaves[2].kind.array(), Some((DType::Bool, &[][..])));
        let no_steps = json!({"featuresDict": {"features": {"image": {"image": {}}}}});
        let err = Features::parse(Path::new("features.json"), &no_steps).unwrap_err().to_string();
        assert!(err.contains("`steps`") && err.contains("is missing"), "{err}");
    }
}
