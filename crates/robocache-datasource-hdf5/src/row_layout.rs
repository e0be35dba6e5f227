//! Rows of unfiltered datasets read straight from the file with positioned
//! reads (`pread`), outside the HDF5 library.
//!
//! HDF5 (and so `hdf5-metno`) serialises every call behind one global lock:
//! however many reader threads a loader runs, only one copies image rows at
//! a time. For datasets whose bytes sit in the file exactly as they sit in
//! memory (contiguous, or chunked by whole rows, without filters, elements
//! little-endian of the same size) the rows can be read without the library:
//! [`RowLayout`] records where each block of rows starts, once per dataset,
//! and [`RowLayout::read`] copies any row range with positioned reads on a
//! shared file handle, from any number of threads at once.
//!
//! A layout is only used after its first and last rows, read both ways,
//! agreed; every other dataset (compressed, shuffled, big-endian, bool,
//! compact, partly unallocated) is read through HDF5 as before.

use std::fs::File;
use std::ops::Range;

use hdf5::dataset::Layout;
use hdf5::datatype::ByteOrder;
use robocache_cpu::{DType, HostVec};
use robocache_datasource::direct_read::read_exact_at;

/// Where the rows of one dataset lie in its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RowLayout {
    /// Bytes of one row (all trailing dimensions).
    row_bytes: usize,
    /// Rows in the dataset.
    rows: usize,
    /// Rows in each block; the whole dataset for contiguous storage.
    rows_per_block: usize,
    /// File offset of each block's first byte, in row order.
    block_offsets: Vec<u64>,
}

impl RowLayout {
    /// The layout of `dataset` if its rows can be read directly as `dtype`
    /// with `row_bytes` bytes a row; `None` when the library must read it.
    pub fn of(dataset: &hdf5::Dataset, dtype: DType, row_bytes: usize) -> Option<RowLayout> {
        if !cfg!(target_endian = "little") || dtype == DType::Bool || row_bytes == 0 {
            return None;
        }
        let datatype = dataset.dtype().ok()?;
        let order_fits = match datatype.byte_order() {
            ByteOrder::LittleEndian => true,
            ByteOrder::None => dtype.size_in_bytes() == 1,
            _ => false,
        };
        if !order_fits || datatype.size() != dtype.size_in_bytes() || !dataset.filters().is_empty() {
            return None;
        }
        let shape = dataset.shape();
        let rows = *shape.first()?;
        if shape[1..].iter().product::<usize>() * dtype.size_in_bytes() != row_bytes || rows == 0 {
            return None;
        }
        match dataset.layout() {
            Layout::Contiguous => {
                let offset = dataset.offset()?;
                Some(RowLayout { row_bytes, rows, rows_per_block: rows, block_offsets: vec![offset] })
            }
            Layout::Chunked => {
                let chunk = dataset.chunk()?;
                // Only chunks of whole rows are runs of contiguous rows.
                if chunk.len() != shape.len() || chunk[1..] != shape[1..] || chunk[0] == 0 {
                    return None;
                }
                let rows_per_block = chunk[0];
                let blocks = rows.div_ceil(rows_per_block);
                let mut block_offsets = vec![u64::MAX; blocks];
                let mut usable = true;
                let visited = dataset.chunks_visit(|chunk| {
                    let block = chunk.offset[0] as usize / rows_per_block;
                    let full = (rows_per_block * row_bytes) as u64;
                    if chunk.filter_mask != 0 || chunk.size != full || block >= blocks {
                        usable = false;
                        return 1; // stop: this dataset goes through HDF5
                    }
                    block_offsets[block] = chunk.addr;
                    0
                });
                (visited.is_ok() && usable && !block_offsets.contains(&u64::MAX)).then_some(RowLayout {
                    row_bytes,
                    rows,
                    rows_per_block,
                    block_offsets,
                })
            }
            _ => None,
        }
    }

    /// Rows in the dataset.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Reads rows `rows` (within [`RowLayout::rows`]) of `file` as `dtype`.
    pub fn read(&self, file: &File, dtype: DType, rows: Range<usize>) -> std::io::Result<HostVec> {
        let mut data = HostVec::zeros(dtype, rows.len() * self.row_bytes / dtype.size_in_bytes());
        let bytes = data.as_bytes_mut().ok_or_else(|| std::io::Error::other("bool rows are read through HDF5"))?;
        self.read_into(file, rows, bytes)?;
        Ok(data)
    }

    /// Reads rows `rows` (within [`RowLayout::rows`]) of `file` into `out`,
    /// which holds exactly those rows (the caller checks).
    pub fn read_into(&self, file: &File, rows: Range<usize>, out: &mut [u8]) -> std::io::Result<()> {
        let mut row = rows.start;
        let mut written = 0;
        while row < rows.end {
            let block = row / self.rows_per_block;
            let block_end = ((block + 1) * self.rows_per_block).min(rows.end);
            let within = (row - block * self.rows_per_block) * self.row_bytes;
            let len = (block_end - row) * self.row_bytes;
            read_exact_at(file, &mut out[written..written + len], self.block_offsets[block] + within as u64)?;
            written += len;
            row = block_end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;

    use super::*;

    /// `[rows, 3]` f32 rows `r * 10 + c`.
    fn values(rows: usize) -> Array2<f32> {
        Array2::from_shape_fn((rows, 3), |(r, c)| (r * 10 + c) as f32)
    }

    fn layout(dataset: &hdf5::Dataset) -> Option<RowLayout> {
        RowLayout::of(dataset, DType::F32, 3 * 4)
    }

    #[test]
    fn rows_are_read_directly_from_contiguous_and_row_chunked_datasets() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("layouts.hdf5");
        let file = hdf5::File::create(&path).unwrap();
        let data = values(7);
        let contiguous = file.new_dataset_builder().with_data(&data).create("contiguous").unwrap();
        // Chunks of 2 rows: the last of four chunks holds one row.
        let chunked = file.new_dataset_builder().chunk((2, 3)).with_data(&data).create("chunked").unwrap();
        file.flush().unwrap();
        let raw = File::open(&path).unwrap();
        for dataset in [&contiguous, &chunked] {
            let layout = layout(dataset).unwrap_or_else(|| panic!("{} is read directly", dataset.name()));
            assert_eq!(layout.rows(), 7);
            for rows in [0..7, 0..1, 1..4, 3..5, 6..7, 2..2] {
                let read = layout.read(&raw, DType::F32, rows.clone()).unwrap();
                let expected: Vec<f32> = rows.clone().flat_map(|r| (0..3).map(move |c| (r * 10 + c) as f32)).collect();
                assert_eq!(read, HostVec::F32(expected), "{} rows {rows:?}", dataset.name());
            }
        }
    }

    #[test]
    fn filtered_partial_row_and_bool_datasets_go_through_hdf5() {
        let dir = tempfile::tempdir().unwrap();
        let file = hdf5::File::create(dir.path().join("layouts.hdf5")).unwrap();
        let data = values(8);
        let deflated = file.new_dataset_builder().chunk((2, 3)).deflate(4).with_data(&data).create("deflated").unwrap();
        assert_eq!(layout(&deflated), None, "compressed chunks need the library");
        let split = file.new_dataset_builder().chunk((4, 1)).with_data(&data).create("split").unwrap();
        assert_eq!(layout(&split), None, "a chunk of part of a row is not a run of rows");
        let flags = file.new_dataset_builder().with_data(&[true, false, true]).create("flags").unwrap();
        assert_eq!(RowLayout::of(&flags, DType::Bool, 1), None, "bool bytes are converted by the library");
        let contiguous = file.new_dataset_builder().with_data(&data).create("contiguous").unwrap();
        assert_eq!(RowLayout::of(&contiguous, DType::F64, 3 * 8), None, "f32 in the file is not f64 in memory");
        assert_eq!(RowLayout::of(&contiguous, DType::F32, 2 * 4), None, "rows of another width");
    }
}
