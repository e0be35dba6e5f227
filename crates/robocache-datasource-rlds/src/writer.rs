//! Writes RLDS builder directories in TFDS's on-disk format (TFRecord
//! shards of `tf.train.Example`s, `features.json`, `dataset_info.json`),
//! for the memory test and for demos and benchmarks that need a directory of
//! a given size without TensorFlow. The tests compare the reader with
//! directories written by TFDS itself; this writer is checked by reading
//! its output back.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use prost::Message;
use serde_json::{json, Value};

use super::builder::{DATASET_INFO, FEATURES};
use super::example::{BytesList, Example, Feature, Features, FloatList, Int64List, Kind};
use super::tfrecord::frame;
use robocache_datasource::{Error, Result};

/// What [`write_rlds`] generates.
#[derive(Clone, Debug, PartialEq)]
pub struct RldsSpec {
    /// The dataset's name (`dataset_info.json`, shard names).
    pub name: String,
    /// Episodes (one record each).
    pub episodes: usize,
    /// Mean steps per episode (each varies by up to ±25%).
    pub mean_steps: usize,
    /// Shards of the `train` split.
    pub shards: usize,
    /// JPEG camera frames `[H, W, 3]` (None: no camera).
    pub image: Option<[usize; 2]>,
    /// Seed of the signals and lengths.
    pub seed: u64,
}

impl Default for RldsSpec {
    /// 64 episodes of about 100 steps, one 64×64 JPEG camera, 4 shards.
    fn default() -> Self {
        RldsSpec {
            name: "robocache_synthetic_rlds".into(),
            episodes: 64,
            mean_steps: 100,
            shards: 4,
            image: Some([64, 64]),
            seed: 0,
        }
    }
}

fn tensor(shape: &[usize], dtype: &str) -> Value {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    json!({"pythonClassName": "tensorflow_datasets.core.features.tensor_feature.Tensor",
           "tensor": {"shape": {"dimensions": dims}, "dtype": dtype, "encoding": "none"}})
}

fn dict(features: Value) -> Value {
    json!({"pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
           "featuresDict": {"features": features}})
}

/// Writes `<dir>/<name>/1.0.0/` and returns that version folder.
pub fn write_rlds(dir: &Path, spec: &RldsSpec) -> Result<PathBuf> {
    if spec.shards == 0 || spec.episodes < spec.shards {
        return Err(Error::Invalid(format!(
            "{} episodes cannot fill {} shards: every shard needs an episode",
            spec.episodes, spec.shards
        )));
    }
    let version = dir.join(&spec.name).join("1.0.0");
    let io = |file: &Path| {
        let file = file.to_path_buf();
        move |error| Error::Io { file: file.clone(), error }
    };
    std::fs::create_dir_all(&version).map_err(io(&version))?;

    let mut observation = json!({"state": tensor(&[8], "float32")});
    if let Some([h, w]) = spec.image {
        let dims = [h.to_string(), w.to_string(), "3".to_string()];
        observation["image"] = json!({"pythonClassName": "tensorflow_datasets.core.features.image_feature.Image",
            "image": {"shape": {"dimensions": dims}, "dtype": "uint8", "encodingFormat": "jpeg"}});
    }
    let steps = dict(json!({
        "observation": dict(observation),
        "action": tensor(&[7], "float32"),
        "reward": tensor(&[], "float32"),
        "discount": tensor(&[], "float32"),
        "is_first": tensor(&[], "bool"),
        "is_last": tensor(&[], "bool"),
        "is_terminal": tensor(&[], "bool"),
        "language_instruction": {"pythonClassName": "tensorflow_datasets.core.features.text_feature.Text", "text": {}},
    }));
    let features = dict(json!({
        "steps": {"pythonClassName": "tensorflow_datasets.core.features.dataset_feature.Dataset",
                  "sequence": {"feature": steps, "length": "-1"}},
        "episode_metadata": dict(json!({"episode_id": tensor(&[], "int64")})),
    }));
    let path = version.join(FEATURES);
    std::fs::write(&path, serde_json::to_vec_pretty(&features).expect("JSON")).map_err(io(&path))?;

    // A few distinct frames, encoded once and reused: the size of the data is
    // what the tests and benchmarks need, not its variety.
    let frames: Vec<Vec<u8>> = match spec.image {
        Some([h, w]) => (0..8).map(|f| jpeg_frame(h, w, f)).collect::<Result<_>>()?,
        None => Vec::new(),
    };
    let mut random = robocache_datasource::split_mix::SplitMix(spec.seed);
    let mut shard_lengths = vec![0usize; spec.shards];
    let mut writers = (0..spec.shards)
        .map(|s| {
            let path = version.join(format!("{}-train.tfrecord-{s:05}-of-{:05}", spec.name, spec.shards));
            std::fs::File::create(&path).map(|f| (std::io::BufWriter::new(f), path.clone())).map_err(io(&path))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut bytes = 0u64;
    for e in 0..spec.episodes {
        let n = ((spec.mean_steps as f64) * (0.75 + 0.5 * random.unit())).round().max(2.0) as usize;
        let phase = random.unit() * std::f64::consts::TAU;
        let signal = |i: usize, c: usize| ((i as f64 * 0.1 + c as f64) * (1.0 + 0.1 * c as f64) + phase).sin() as f32;
        let floats = |values: Vec<f32>| Feature { kind: Some(Kind::FloatList(FloatList { value: values })) };
        let ints = |values: Vec<i64>| Feature { kind: Some(Kind::Int64List(Int64List { value: values })) };
        let mut feature: HashMap<String, Feature> = HashMap::new();
        feature.insert("steps/observation/state".into(), floats((0..n * 8).map(|v| signal(v / 8, v % 8)).collect()));
        feature.insert("steps/action".into(), floats((0..n * 7).map(|v| signal(v / 7, v % 7 + 8)).collect()));
        feature.insert("steps/reward".into(), floats((0..n).map(|i| f32::from(u8::from(i + 1 == n))).collect()));
        feature.insert("steps/discount".into(), floats(vec![1.0; n]));
        feature.insert("steps/is_first".into(), ints((0..n).map(|i| i64::from(i == 0)).collect()));
        feature.insert("steps/is_last".into(), ints((0..n).map(|i| i64::from(i + 1 == n)).collect()));
        feature.insert("steps/is_terminal".into(), ints((0..n).map(|i| i64::from(i + 1 == n)).collect()));
        let text = format!("task {}", e % 5).into_bytes();
        feature.insert(
            "steps/language_instruction".into(),
            Feature { kind: Some(Kind::BytesList(BytesList { value: vec![text; n] })) },
        );
        if !frames.is_empty() {
            let images = (0..n).map(|i| frames[(i + e) % frames.len()].clone()).collect();
            feature.insert(
                "steps/observation/image".into(),
                Feature { kind: Some(Kind::BytesList(BytesList { value: images })) },
            );
        }
        feature.insert("episode_metadata/episode_id".into(), ints(vec![e as i64]));
        let record = frame(&Example { features: Some(Features { feature }) }.encode_to_vec());
        bytes += record.len() as u64;
        let shard = e % spec.shards;
        shard_lengths[shard] += 1;
        let (writer, path) = &mut writers[shard];
        writer.write_all(&record).map_err(io(path))?;
    }
    for (writer, path) in &mut writers {
        writer.flush().map_err(io(path))?;
    }
    let info = json!({
        "fileFormat": "tfrecord",
        "name": spec.name,
        "version": "1.0.0",
        "description": "Synthetic RLDS episodes written by robocache.",
        "splits": [{
            "name": "train",
            "filepathTemplate": "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}",
            "numBytes": bytes.to_string(),
            "shardLengths": shard_lengths.iter().map(usize::to_string).collect::<Vec<_>>(),
        }],
    });
    let path = version.join(DATASET_INFO);
    std::fs::write(&path, serde_json::to_vec_pretty(&info).expect("JSON")).map_err(io(&path))?;
    Ok(version)
}

/// A smooth `[h, w, 3]` frame as JPEG (quality 90).
fn jpeg_frame(h: usize, w: usize, f: usize) -> Result<Vec<u8>> {
    let pixels: Vec<u8> = (0..h * w * 3)
        .map(|i| {
            let (y, x, c) = (i / (w * 3), i / 3 % w, i % 3);
            (127.0 + 120.0 * ((x as f64 * 0.05 + y as f64 * 0.03 + f as f64 + c as f64 * 2.0).sin())) as u8
        })
        .collect();
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
        .encode(&pixels, w as u32, h as u32, image::ExtendedColorType::Rgb8)
        .map_err(|e| Error::Invalid(format!("cannot encode a {h}x{w} JPEG frame: {e}")))?;
    Ok(out)
}
