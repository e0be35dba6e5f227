use std::path::PathBuf;

use anyhow::{bail, Result};
use robocache::{DType, HostVec, Tensor, VoxelGrid, VoxelInput, VoxelMode, DEFAULT_GRID_BUDGET_BYTES};

use crate::npy;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Points `[N, 3]` float32.
    #[arg(long)]
    points: PathBuf,
    /// Features `[N, F]` float32 (for mean and max).
    #[arg(long)]
    features: Option<PathBuf>,
    /// Cloud of each point `[N]` (integers), for several clouds in one call.
    #[arg(long)]
    clouds: Option<PathBuf>,
    /// Number of clouds with --clouds (default: the largest index + 1).
    #[arg(long, requires = "clouds")]
    num_clouds: Option<usize>,
    /// Grid origin `x,y,z` in the points' units.
    #[arg(long, value_parser = super::triple::<f32>, allow_hyphen_values = true)]
    origin: [f32; 3],
    /// Voxel edge: one value, or `sx,sy,sz`.
    #[arg(long, value_parser = super::triple::<f32>)]
    voxel_size: [f32; 3],
    /// Voxels per axis: one value, or `X,Y,Z`.
    #[arg(long, value_parser = super::triple::<usize>)]
    dims: [usize; 3],
    /// occupancy (u8), count (u32), mean or max (f32 per feature).
    #[arg(long, default_value = "occupancy")]
    mode: String,
    /// Largest output allowed, in bytes.
    #[arg(long, default_value_t = DEFAULT_GRID_BUDGET_BYTES)]
    budget_bytes: u64,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Output `.npy` (`[B, X, Y, Z]`, or `[B, X, Y, Z, F]`); counts of mean go to `.counts.npy`.
    #[arg(long, short)]
    output: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    let mode: VoxelMode = args.mode.parse().map_err(anyhow::Error::msg)?;
    let device = super::open_device(&args.backend)?;
    tracing::info!(backend = %device, "voxelize");
    let hint = " (convert with .astype(numpy.float32))";
    let points = npy::read(&args.points)?;
    npy::expect_dtype(&args.points, &points, DType::F32, hint)?;
    let points = Tensor::from_host_vec(&device, points.data, &points.shape)?;
    let features = match &args.features {
        Some(path) => {
            let f = npy::read(path)?;
            npy::expect_dtype(path, &f, DType::F32, hint)?;
            Some(Tensor::from_host_vec(&device, f.data, &f.shape)?)
        }
        None => None,
    };
    let clouds = match &args.clouds {
        Some(path) => {
            let c = npy::read(path)?;
            let count = match args.num_clouds {
                Some(n) => n,
                None => c.data.as_slice().to_f64_vec().iter().fold(0.0f64, |m, &v| m.max(v)) as usize + 1,
            };
            Some((Tensor::from_host_vec(&device, c.data, &c.shape)?, count))
        }
        None => None,
    };
    let grid = VoxelGrid { origin: args.origin, voxel_size: args.voxel_size, dims: args.dims };
    let input =
        VoxelInput { points: &points, features: features.as_ref(), clouds: clouds.as_ref().map(|(t, n)| (t, *n)) };
    let out = device.voxelize(&input, &grid, mode, args.budget_bytes)?;
    npy::write(&args.output, &out.grid.to_host()?, out.grid.shape())?;
    if let Some(counts) = &out.counts {
        npy::write(&super::sibling(&args.output, "counts"), &counts.to_host()?, counts.shape())?;
    }
    let occupied = match out.counts.as_ref().map(Tensor::to_host).transpose()? {
        Some(HostVec::U32(c)) => c.iter().filter(|&&n| n > 0).count(),
        Some(_) => bail!("counts are not u32"),
        None => match out.grid.to_host()? {
            HostVec::U8(v) => v.iter().filter(|&&n| n > 0).count(),
            HostVec::U32(v) => v.iter().filter(|&&n| n > 0).count(),
            HostVec::F32(v) => {
                v.chunks(*out.grid.shape().last().unwrap_or(&1)).filter(|f| f.iter().any(|x| x.is_finite())).count()
            }
            _ => 0,
        },
    };
    println!(
        "wrote {} {:?}: {occupied} voxels occupied, {} points dropped (outside the grid or non-finite)",
        args.output.display(),
        out.grid.shape(),
        out.dropped_count()?
    );
    Ok(())
}
