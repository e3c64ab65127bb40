//! This server's memory report in cubecl's shape: sliced and exclusive
//! pools are cubecl's dynamic pools, the persistent pool its persistent
//! one. cubecl's dedicated pool has no counterpart (reported empty).

use cubecl_environment::stream::StreamId;
use cubecl_runtime::memory_management::{
    MemoryPoolKind, MemoryPoolReport, MemoryPoolsReport, MemoryUsage, StreamMemoryReport,
};
use wgpu_server::runtime::{PoolKind, PoolReport, StreamMemoryReport as InnerReport};

fn pool(report: &PoolReport, kind: MemoryPoolKind) -> MemoryPoolReport {
    MemoryPoolReport {
        kind,
        usage: MemoryUsage {
            number_allocs: report.allocations,
            bytes_in_use: report.bytes_in_use,
            bytes_padding: report.bytes_padding,
            bytes_reserved: report.bytes_reserved,
        },
        pages: report.pages,
        pages_peak: report.peak_pages,
        pages_unmapped: 0,
        largest_alloc: 0,
    }
}

fn empty(kind: MemoryPoolKind) -> MemoryPoolReport {
    MemoryPoolReport {
        kind,
        usage: MemoryUsage::default(),
        pages: 0,
        pages_peak: 0,
        pages_unmapped: 0,
        largest_alloc: 0,
    }
}

/// `report`, as cubecl's report of `stream`.
pub fn to_cubecl(stream: StreamId, report: &InnerReport) -> StreamMemoryReport {
    let mut dynamic = Vec::new();
    let mut persistent = empty(MemoryPoolKind::Persistent);
    for p in &report.pools {
        match p.kind {
            PoolKind::Sliced {
                page_size,
                max_slice,
            } => dynamic.push(pool(
                p,
                MemoryPoolKind::Sliced {
                    page_size,
                    max_slice_size: max_slice,
                },
            )),
            PoolKind::Exclusive { max_slice } => dynamic.push(pool(
                p,
                MemoryPoolKind::Exclusive {
                    max_alloc_size: max_slice,
                },
            )),
            PoolKind::Persistent => persistent = pool(p, MemoryPoolKind::Persistent),
        }
    }
    StreamMemoryReport {
        stream,
        pools: MemoryPoolsReport {
            dynamic,
            persistent,
            dedicated: empty(MemoryPoolKind::Direct),
        },
        auxiliary: Vec::new(),
    }
}
