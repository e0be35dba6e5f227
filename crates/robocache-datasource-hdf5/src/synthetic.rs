//! Synthetic multi-rate datasets in the RoboMimic layout: what `robocache
//! demo` runs on when given no file, and what tests and benchmarks use when
//! they need a file of a given size without Python.
//!
//! Each demo holds smooth signals at three rates: the control clock
//! (actions, end-effector pose, gripper), a faster joint encoder and a
//! camera, the last two with their own `rate_hz` attribute.

use std::f64::consts::PI;
use std::path::Path;

use robocache_cpu::HostVec;

use crate::hdf5_writer::{
    create_file, write_dataset, write_error, write_integer_attr, write_number_attr, write_string_attr,
};
use crate::Result;
use robocache_datasource::split_mix::SplitMix;

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticSpec {
    /// Number of demos.
    pub episodes: usize,
    /// Mean steps per demo on the control clock (each demo varies by up to ±25%).
    pub mean_steps: usize,
    /// The control clock (actions, pose, gripper), in Hz.
    pub control_hz: f64,
    /// The joint encoder clock, in Hz.
    pub joint_hz: f64,
    /// The camera clock, in Hz.
    pub camera_hz: f64,
    /// Camera frames `[H, W, 3]` (None: no camera stream).
    pub image: Option<[usize; 2]>,
    /// Seed of the signals and lengths.
    pub seed: u64,
}

impl Default for SyntheticSpec {
    /// 64 demos of about 200 steps at 20 Hz, joints at 100 Hz, a 64×64 camera at 30 Hz.
    fn default() -> Self {
        SyntheticSpec {
            episodes: 64,
            mean_steps: 200,
            control_hz: 20.0,
            joint_hz: 100.0,
            camera_hz: 30.0,
            image: Some([64, 64]),
            seed: 0,
        }
    }
}

/// Writes a RoboMimic-layout file at `path` (replacing it).
pub fn write_robomimic(path: &Path, spec: &SyntheticSpec) -> Result<()> {
    let file = create_file(path)?;
    let error = |location: &str| {
        let location = location.to_owned();
        move |e| write_error(path, &location, e)
    };
    let data = file.create_group("data").map_err(error("data"))?;
    let env_args = serde_json::json!({
        "env_name": "RobocacheSynthetic",
        "type": 1,
        "env_kwargs": { "control_freq": spec.control_hz, "robots": ["Panda"] },
    });
    write_string_attr(&data, "env_args", &env_args.to_string()).map_err(error("data"))?;
    let mut random = SplitMix(spec.seed);
    let mut total = 0usize;
    let mut names = Vec::new();
    for e in 0..spec.episodes {
        let name = format!("demo_{e}");
        let location = format!("data/{name}");
        let steps = ((spec.mean_steps as f64) * (0.75 + 0.5 * random.unit())).round().max(2.0) as usize;
        total += steps;
        let duration = (steps - 1) as f64 / spec.control_hz;
        let phase = random.unit() * 2.0 * PI;
        let demo = data.create_group(&name).map_err(error(&location))?;
        write_integer_attr(&demo, "num_samples", steps as i64).map_err(error(&location))?;
        let control_times: Vec<f64> = (0..steps).map(|i| i as f64 / spec.control_hz).collect();

        let signal = |t: f64, channel: usize| (0.7 * t * (1.0 + channel as f64 * 0.3) + phase + channel as f64).sin();
        let grid = |times: &[f64], channels: usize| -> HostVec {
            HostVec::F32(times.iter().flat_map(|&t| (0..channels).map(move |c| signal(t, c) as f32)).collect())
        };
        let write = |group: &hdf5::Group, key: &str, data: HostVec, shape: &[usize], chunk: usize| {
            write_dataset(group, key, &data, shape, chunk).map_err(error(&format!("{location}/{key}")))
        };
        write(&demo, "actions", grid(&control_times, 7), &[steps, 7], 4096)?;
        write(
            &demo,
            "rewards",
            HostVec::F64((0..steps).map(|i| f64::from(u8::from(i + 1 == steps))).collect()),
            &[steps],
            4096,
        )?;
        write(&demo, "dones", HostVec::I64((0..steps).map(|i| i64::from(i + 1 == steps)).collect()), &[steps], 4096)?;
        let obs = demo.create_group("obs").map_err(error(&format!("{location}/obs")))?;
        write(&obs, "robot0_eef_pos", grid(&control_times, 3), &[steps, 3], 4096)?;
        // A unit quaternion turning about a slowly moving axis (xyzw).
        let quaternions: Vec<f32> = control_times
            .iter()
            .flat_map(|&t| {
                let angle = 0.8 * t + phase;
                let axis = [(0.3 * t).cos(), (0.3 * t).sin(), 0.5];
                let norm = (axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]).sqrt();
                let s = (angle / 2.0).sin() / norm;
                [(axis[0] * s) as f32, (axis[1] * s) as f32, (axis[2] * s) as f32, (angle / 2.0).cos() as f32]
            })
            .collect();
        write(&obs, "robot0_eef_quat", HostVec::F32(quaternions), &[steps, 4], 4096)?;
        let gripper: Vec<f32> = control_times.iter().map(|&t| if signal(t, 5) > 0.0 { 1.0 } else { -1.0 }).collect();
        let gripper = write(&obs, "gripper_closed", HostVec::F32(gripper), &[steps, 1], 4096)?;
        write_string_attr(&gripper, "robocache_kind", "discrete").map_err(error(&location))?;

        let joint_rows = (duration * spec.joint_hz).floor() as usize + 1;
        let joint_times: Vec<f64> = (0..joint_rows).map(|i| i as f64 / spec.joint_hz).collect();
        let joints = write(&obs, "joint_pos", grid(&joint_times, 7), &[joint_rows, 7], 4096)?;
        write_number_attr(&joints, "rate_hz", spec.joint_hz).map_err(error(&location))?;

        if let Some([height, width]) = spec.image {
            let frames = (duration * spec.camera_hz).floor() as usize + 1;
            let mut pixels = vec![0u8; frames * height * width * 3];
            for (f, frame) in pixels.chunks_exact_mut(height * width * 3).enumerate() {
                let shade = (f as f64 / spec.camera_hz * 40.0 + phase * 10.0) as usize;
                for (i, pixel) in frame.iter_mut().enumerate() {
                    *pixel = ((i / 3 + shade) % 251) as u8;
                }
            }
            let camera = write(&obs, "agentview_image", HostVec::U8(pixels), &[frames, height, width, 3], 1)?;
            write_number_attr(&camera, "rate_hz", spec.camera_hz).map_err(error(&location))?;
        }
        names.push(name);
    }
    write_integer_attr(&data, "total", total as i64).map_err(error("data"))?;
    let mask = file.create_group("mask").map_err(error("mask"))?;
    let split = names.len() - names.len() / 10;
    for (key, demos) in [("train", &names[..split]), ("valid", &names[split..])] {
        let strings: Vec<hdf5::types::VarLenUnicode> = demos.iter().map(|n| n.parse().unwrap_or_default()).collect();
        mask.new_dataset_builder().with_data(&strings).create(key).map_err(error(&format!("mask/{key}")))?;
    }
    drop((data, mask));
    file.close().map_err(error("/"))
}
