use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use robocache::{Boundary, ChannelSpec, HostVec, ResampleSpec, StreamInput, TargetTimes, Tensor, TimeAxis};

use crate::npy;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Data `[B, S, D]` or `[S, D]` (a batch of one), any numeric dtype.
    #[arg(long)]
    data: PathBuf,
    /// Source times in seconds, `[S]` shared or `[B, S]` per row.
    #[arg(long, conflicts_with = "hz", required_unless_present = "hz")]
    times: Option<PathBuf>,
    /// Source rate in Hz, instead of --times (sample i at START + i/HZ).
    #[arg(long)]
    hz: Option<f64>,
    /// First source time with --hz.
    #[arg(long, default_value_t = 0.0, requires = "hz")]
    start: f64,
    /// Valid samples per row `[B]` (integers), for padded batches.
    #[arg(long)]
    lengths: Option<PathBuf>,
    /// Target times in seconds, `[T]` shared or `[B, T]` per row.
    #[arg(long, conflicts_with = "target_hz", required_unless_present = "target_hz")]
    targets: Option<PathBuf>,
    /// Target rate in Hz, instead of --targets.
    #[arg(long, requires = "target_count")]
    target_hz: Option<f64>,
    /// First target time with --target-hz.
    #[arg(long, default_value_t = 0.0)]
    target_start: f64,
    /// Number of targets with --target-hz.
    #[arg(long)]
    target_count: Option<usize>,
    /// One method for all channels: linear, nearest, previous, slerp-xyzw, slerp-wxyz.
    #[arg(long, default_value = "linear", conflicts_with = "channels")]
    method: String,
    /// Methods per channel group, e.g. `0..3:linear,3..7:slerp-xyzw,7..8:previous`.
    #[arg(long)]
    channels: Option<String>,
    /// Outside a row's time range: clamp, extrapolate or fill:VALUE.
    #[arg(long, default_value = "clamp")]
    boundary: String,
    /// Skip the check that source times strictly increase.
    #[arg(long)]
    trusted: bool,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Output `.npy`; the valid mask goes to OUTPUT with `.valid.npy`.
    #[arg(long, short)]
    output: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    let channels: ChannelSpec = args.channels.as_deref().unwrap_or(&args.method).parse().map_err(anyhow::Error::msg)?;
    let boundary: Boundary = args.boundary.parse().map_err(anyhow::Error::msg)?;
    let spec = ResampleSpec { channels, boundary, trusted: args.trusted };
    let device = super::open_device(&args.backend)?;
    tracing::info!(backend = %device, "resample");

    let data = npy::read(&args.data)?;
    let (batch_of_one, shape) = match data.shape.as_slice() {
        [s, d] => (true, vec![1, *s, *d]),
        [b, s, d] => (false, vec![*b, *s, *d]),
        other => bail!("{}: data must be [S, D] or [B, S, D], got shape {other:?}", args.data.display()),
    };
    let data_tensor = Tensor::from_host_vec(&device, data.data, &shape)?;

    let times_tensor = match &args.times {
        Some(path) => {
            let (times, times_shape) = npy::times_f64(path, npy::read(path)?)?;
            Some(Tensor::from_slice(&device, &times, &times_shape).with_context(|| path.display().to_string())?)
        }
        None => None,
    };
    let times = match (&times_tensor, args.hz) {
        (Some(t), _) => TimeAxis::Tensor(t),
        (None, Some(hz)) => TimeAxis::Uniform { start: args.start, hz },
        (None, None) => bail!("give --times or --hz"),
    };
    let lengths = match &args.lengths {
        Some(path) => {
            let array = npy::read(path)?;
            Some(Tensor::from_host_vec(&device, array.data, &array.shape)?)
        }
        None => None,
    };
    let targets_tensor = match &args.targets {
        Some(path) => {
            let (targets, shape) = npy::times_f64(path, npy::read(path)?)?;
            Some(Tensor::from_slice(&device, &targets, &shape)?)
        }
        None => None,
    };
    let targets = match (&targets_tensor, args.target_hz, args.target_count) {
        (Some(t), _, _) => TargetTimes::Tensor(t),
        (None, Some(hz), Some(len)) => TargetTimes::Uniform { start: args.target_start, hz, len },
        _ => bail!("give --targets, or --target-hz with --target-count"),
    };

    let mut stream = StreamInput::new(&data_tensor, times);
    if let Some(l) = &lengths {
        stream = stream.with_lengths(l);
    }
    let out = device.resample(&stream, &targets, &spec)?;
    let (mut out_shape, mut valid_shape) = (out.data.shape().to_vec(), out.valid.shape().to_vec());
    if batch_of_one {
        out_shape.remove(0);
        valid_shape.remove(0);
    }
    let valid = out.valid.to_host()?;
    npy::write(&args.output, &out.data.to_host()?, &out_shape)?;
    let valid_path = super::sibling(&args.output, "valid");
    npy::write(&valid_path, &valid, &valid_shape)?;
    let HostVec::Bool(mask) = &valid else { bail!("the valid mask is not bool") };
    let inside = mask.iter().filter(|&&v| v).count();
    println!(
        "wrote {} {:?} and {} ({inside} of {} targets inside their row's time range)",
        args.output.display(),
        out_shape,
        valid_path.display(),
        mask.len()
    );
    Ok(())
}
