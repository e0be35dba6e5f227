//! Every operation against torchvision v2's functional one with the same
//! parameters (tests/torchvision_oracle.py, run with the project's Python):
//! within one level of 255 on random frames whose sides and channels
//! differ, so that a wrong sign, axis or order fails.

use std::io::Write;
use std::process::{Command, Stdio};

use robocache_augment::reference::{augment_frame, level_to_u8};
use robocache_augment::{
    preset, AffineParams, Augment, CropWindow, Draws, FrameAugment, Interpolation, Op, RandomSubset, SampleKey,
};
use serde_json::{json, Value};

fn python() -> String {
    std::env::var("ROBOCACHE_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// The oracle's answers to `jobs`.
fn oracle(jobs: &[Value]) -> Vec<Value> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/torchvision_oracle.py");
    let mut child = Command::new(python())
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start the torchvision oracle");
    let input = serde_json::to_vec(jobs).expect("jobs as JSON");
    child.stdin.take().expect("stdin").write_all(&input).expect("jobs written");
    let output = child.wait_with_output().expect("oracle output");
    assert!(output.status.success(), "the torchvision oracle failed:\n{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("oracle JSON")
}

/// A frame of `(width, height)` with a gradient, noise and a bright patch
/// off centre: every operation changes it, and a flipped axis shows.
fn frame((width, height): (usize, usize), seed: u64) -> Vec<f32> {
    let mut draws = Draws::new(SampleKey { seed, epoch: 0, sample: 0, camera: 0 });
    let mut out = Vec::with_capacity(width * height * 3);
    for y in 0..height {
        for x in 0..width {
            let patch = x < width / 3 && y < height / 4;
            for c in 0..3 {
                let base =
                    (x as f32 / width as f32) * [0.9, 0.3, 0.6][c] + (y as f32 / height as f32) * [0.1, 0.6, 0.3][c];
                let noise = draws.unit() as f32 * 0.15;
                let v = if patch && c == 0 { 0.95 } else { base * 0.85 + noise };
                out.push((level_to_u8(v.clamp(0.0, 1.0)) as f32) / 255.0);
            }
        }
    }
    out
}

fn op_json(op: &Op) -> Value {
    match *op {
        Op::Brightness(f) => json!(["brightness", f]),
        Op::Contrast(f) => json!(["contrast", f]),
        Op::Saturation(f) => json!(["saturation", f]),
        Op::Hue(f) => json!(["hue", f]),
        Op::Sharpness(f) => json!(["sharpness", f]),
        Op::Gamma(f) => json!(["gamma", f]),
        Op::Affine(a) => json!([
            "affine",
            a.angle,
            a.translate.0,
            a.translate.1,
            a.scale,
            if a.interpolation == Interpolation::Nearest { "nearest" } else { "bilinear" }
        ]),
        Op::Blur { kernel, sigma } => json!(["blur", kernel.0, kernel.1, sigma.0, sigma.1]),
        Op::Noise { .. } => panic!("noise has no oracle of the same values"),
    }
}

fn job(augment: &FrameAugment, frame: &[f32], size: (usize, usize)) -> Value {
    let crop = augment.crop.map(|c| json!([c.left, c.top, c.width, c.height, c.output.0, c.output.1]));
    json!({
        "job": "apply",
        "frame": frame,
        "size": [size.0, size.1],
        "crop": crop,
        "ops": augment.ops.iter().map(op_json).collect::<Vec<_>>(),
    })
}

/// Each case against the oracle: the largest difference in levels of 255,
/// and the share of values more than `strict` apart.
fn check_cases(cases: &[(String, FrameAugment)], size: (usize, usize), bound: f32) {
    let frames: Vec<Vec<f32>> = (0..cases.len()).map(|i| frame(size, i as u64 + 7)).collect();
    let jobs: Vec<Value> = cases.iter().zip(&frames).map(|((_, a), f)| job(a, f, size)).collect();
    let answers = oracle(&jobs);
    for (((name, augment), source), answer) in cases.iter().zip(&frames).zip(answers) {
        let ours = augment_frame(augment, source, size, 0);
        let theirs: Vec<f32> = serde_json::from_value(answer["frame"].clone()).expect("frame");
        let out_size: (usize, usize) = serde_json::from_value(answer["size"].clone()).expect("size");
        assert_eq!(augment.output_size(size), out_size, "{name}: output size");
        assert_eq!(ours.len(), theirs.len(), "{name}: values");
        let (mut worst, mut at) = (0f32, 0);
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            if (a - b).abs() > worst {
                (worst, at) = ((a - b).abs(), i);
            }
        }
        assert!(
            worst * 255.0 <= bound,
            "{name}: {} levels apart at value {at} (pixel {}, channel {}): ours {}, torchvision {}",
            worst * 255.0,
            at / 3,
            at % 3,
            ours[at],
            theirs[at]
        );
        // The 8-bit frames torchvision's to_dtype would give: one level.
        let differ = ours.iter().zip(&theirs).filter(|(a, b)| level_to_u8(**a).abs_diff(level_to_u8(**b)) > 1).count();
        assert_eq!(differ, 0, "{name}: {differ} 8-bit values more than a level apart");
    }
}

fn single(op: Op) -> FrameAugment {
    FrameAugment { crop: None, ops: vec![op] }
}

#[test]
fn colour_operations_equal_torchvision() {
    let mut cases = Vec::new();
    for f in [0.0, 0.55, 0.8, 1.2, 1.9] {
        cases.push((format!("brightness {f}"), single(Op::Brightness(f))));
        cases.push((format!("contrast {f}"), single(Op::Contrast(f))));
        cases.push((format!("saturation {f}"), single(Op::Saturation(f))));
        cases.push((format!("sharpness {f}"), single(Op::Sharpness(f))));
        cases.push((format!("gamma {f}"), single(Op::Gamma(f + 0.1))));
    }
    for h in [-0.5, -0.31, -0.05, 0.0, 0.02, 0.25, 0.5] {
        cases.push((format!("hue {h}"), single(Op::Hue(h))));
    }
    check_cases(&cases, (37, 23), 1.0);
}

#[test]
fn geometry_equals_torchvision() {
    let affine =
        |angle, translate, scale, interpolation| Op::Affine(AffineParams { angle, translate, scale, interpolation });
    let mut cases = Vec::new();
    for interpolation in [Interpolation::Nearest, Interpolation::Bilinear] {
        for (angle, translate, scale) in
            [(0.0, (0, 0), 1.0), (4.3, (0, 0), 1.0), (-5.0, (2, -1), 1.0), (90.0, (0, 0), 1.0), (12.5, (-3, 2), 1.15)]
        {
            cases.push((
                format!("affine {angle} {translate:?} {scale} {interpolation:?}"),
                single(affine(angle, translate, scale, interpolation)),
            ));
        }
    }
    let crop = |left, top, width, height, output| FrameAugment {
        crop: Some(CropWindow { left, top, width, height, output }),
        ops: Vec::new(),
    };
    cases.push(("crop".into(), crop(3, 2, 30, 19, (30, 19))));
    cases.push(("crop resized up".into(), crop(1, 1, 35, 21, (37, 23))));
    cases.push(("crop resized down".into(), crop(5, 0, 29, 23, (16, 11))));
    cases.push(("crop resized, other aspect".into(), crop(0, 4, 12, 15, (20, 9))));
    cases.push(("blur 3".into(), single(Op::Blur { kernel: (3, 3), sigma: (0.8, 0.8) })));
    cases.push(("blur 5x3".into(), single(Op::Blur { kernel: (5, 3), sigma: (1.7, 1.1) })));
    check_cases(&cases, (37, 23), 1.0);
}

#[test]
fn drawn_chains_equal_torchvision_applied_in_order() {
    // The presets' draws, applied by torchvision one operation after the
    // other: the order, the crops and the factors are what counts.
    let size = (40, 30);
    let mut cases = Vec::new();
    for name in ["lerobot", "act", "openpi", "groot", "diffusion_policy"] {
        let config = preset(name, &["cam_high"]).expect("preset");
        for sample in 0..6 {
            let key = SampleKey { seed: 5, epoch: 1, sample, camera: 0 };
            cases.push((format!("{name} sample {sample}"), config.default.draw(key, size)));
        }
    }
    // Chains round once at the end, as torchvision on float frames: the
    // differences of each operation add up to at most a level or two.
    check_cases(&cases, size, 2.0);
}

#[test]
fn lerobot_subsets_have_lerobots_distribution() {
    // LeRobot's defaults: 3 of 6 equally weighted, and a skewed weighting
    // with random order; each subset's frequency within 4 sigma.
    for (weights, random_order) in [(vec![1.0; 6], false), (vec![1.0, 3.0, 0.5, 2.0], true)] {
        let draws = 6_000usize;
        let job = json!({"job": "lerobot_subsets", "weights": weights, "n_subset": 3,
                         "random_order": random_order, "draws": draws});
        let theirs: std::collections::BTreeMap<String, u64> =
            serde_json::from_value(oracle(&[job])[0]["counts"].clone()).expect("counts");
        let transforms = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| robocache_augment::Weighted {
                name: format!("t{i}"),
                weight: w,
                transform: robocache_augment::Transform::Brightness(robocache_augment::Range::new(1.0, 1.0)),
            })
            .collect();
        let augment =
            Augment { crop: None, transforms: RandomSubset { transforms, max_num_transforms: 3, random_order } };
        let mut ours = std::collections::BTreeMap::<String, u64>::new();
        for sample in 0..draws as u64 {
            let key = SampleKey { seed: 11, epoch: 0, sample, camera: 0 };
            let chosen = augment.transforms.choose(&mut Draws::new(key));
            *ours.entry(chosen.iter().map(usize::to_string).collect::<Vec<_>>().join(",")).or_default() += 1;
        }
        let keys: std::collections::BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
        for key in keys {
            let (a, b) = (*ours.get(key).unwrap_or(&0) as f64, *theirs.get(key).unwrap_or(&0) as f64);
            let p = (a + b) / (2.0 * draws as f64);
            let sigma = (2.0 * draws as f64 * p * (1.0 - p)).sqrt().max(1.0);
            assert!((a - b).abs() <= 4.0 * sigma, "subset {key}: robocache {a}, LeRobot {b} of {draws}");
        }
    }
}
