//! Ranks whose devices share memory (devices of one adapter, which
//! lavapipe exports and imports by fd too) move their group calls' data on
//! the devices (`collective/device_call.rs`) on GPUs, and on a CPU adapter
//! under `WGPU_SERVER_COLLECTIVE_PATH=device`, with which `cargo xtask ci`
//! runs the whole collective suite and the model twice more (whole, and in
//! 4 KiB pieces); `WGPU_SERVER_COLLECTIVE_PATH=host` forces host staging.
//! Here: that the path is taken, that a call posted before every rank
//! joined goes through the host and the later ones take the device (a
//! refused call keeping its place), a mid-word `src`, and tiny float
//! sums.

use compute_runtime::{
    ComputeWait, DType, DeviceId, Handle, LogCategory, LogLevel, Reduction, Server,
    ServerCommunication, ServerError,
};
use wgpu_server::testing::{
    collective_device_calls, collective_float_products_on_device, collective_on_device,
};

use super::group::*;
use crate::common::*;

/// Rank `r`'s input: `r * 1000 + i` at word `i`.
fn rank_words(s: &mut TestServer, r: usize, len: usize) -> Handle {
    let vals: Vec<u32> = (0..len).map(|i| (r * 1000 + i) as u32).collect();
    upload(s, u32_bytes(&vals), S0)
}

/// A `Wait` all-reduce (`u32` sum) of `src` on `s` over `ids` into a fresh
/// destination: the destination, and what the call returned.
fn sum_of(s: &mut TestServer, src: &Handle, ids: &[DeviceId]) -> (Handle, Result<(), ServerError>) {
    let sum = alloc(s, src.size, S0);
    let result = s.all_reduce(
        src.binding(),
        sum.binding(),
        Reduction::sum(DType::U32),
        S0,
        ids.to_vec(),
        ComputeWait::Wait,
    );
    (sum, result)
}

/// The sums of two ranks' [`rank_words`].
fn two_rank_sum(len: usize) -> Vec<u32> {
    (0..len).map(|i| (1000 + 2 * i) as u32).collect()
}

/// An all-reduce (u32 sum) and an all-gather on every rank, checked.
fn sum_and_gather(g: &mut Group, len: usize) {
    let n = g.n();
    let mut sums = Vec::new();
    let mut gathers = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let src = rank_words(s, r, len);
        let gathered = alloc(s, (4 * len * n) as u64, S0);
        let (sum, result) = sum_of(s, &src, &g.ids);
        result.unwrap_or_else(|e| panic!("rank {r}: all_reduce: {e}"));
        s.all_gather(src.binding(), gathered.binding(), S0, g.ids.clone())
            .unwrap_or_else(|e| panic!("rank {r}: all_gather: {e}"));
        sums.push(sum);
        gathers.push(gathered);
    }
    let want_sum: Vec<u32> = (0..len)
        .map(|i| (0..n).map(|r| (r * 1000 + i) as u32).sum())
        .collect();
    let want_gather: Vec<u32> = (0..n)
        .flat_map(|r| (0..len).map(move |i| (r * 1000 + i) as u32))
        .collect();
    for (r, s) in g.s.iter_mut().enumerate() {
        let got = read(s, &sums[r], S0).unwrap_or_else(|e| panic!("rank {r}: {e}"));
        assert!(bytes_u32(&got) == want_sum, "rank {r}: all_reduce");
        let got = read(s, &gathers[r], S0).unwrap_or_else(|e| panic!("rank {r}: {e}"));
        assert!(bytes_u32(&got) == want_gather, "rank {r}: all_gather");
    }
}

#[test]
fn ranks_on_one_adapter_move_group_calls_on_the_devices() {
    let mut g = Group::new(3);
    let on = collective_on_device(&g.s[0], &g.ids);
    let asked = std::env::var("WGPU_SERVER_COLLECTIVE_PATH").ok();
    let adapter = compute_runtime::Server::utilities(&g.s[0]).adapter.clone();
    let host_by_default = adapter.device_type == "Cpu";
    if asked.as_deref() == Some("host") || (asked.is_none() && host_by_default) {
        // Forced, or a CPU adapter unasked: every group stays host-staged.
        assert_eq!(on, Some(false), "host staging: asked {asked:?}");
        sum_and_gather(&mut g, 1000);
        return;
    }
    if on == Some(false) {
        eprintln!(
            "skipped: {} ({}) does not share device memory between its devices",
            adapter.name, adapter.backend
        );
        return;
    }
    for (r, s) in g.s.iter().enumerate() {
        assert_eq!(collective_on_device(s, &g.ids), Some(true), "rank {r}");
    }
    // What the float probe found (shown with --nocapture).
    let products = collective_float_products_on_device(&g.s[0], &g.ids);
    eprintln!(
        "{}: float products on the devices: {products:?}",
        adapter.name
    );
    sum_and_gather(&mut g, 1000);
    sum_and_gather(&mut g, 1);
}

#[test]
fn a_call_before_every_rank_joined_goes_through_the_host_and_later_ones_take_the_device() {
    // cubecl's `ClientGroup` queues `comm_init` and then the first call on
    // every rank, each served by its own thread: one rank's first call can
    // come before another's `comm_init`. That call alone is host-staged.
    let mut g = Group::open(2);
    let ids = g.ids.clone();
    let len = 100_000; // 400 KB per rank: past the device path's minimum.
    g.s[0].comm_init(ids.clone()).expect("comm_init");
    assert_eq!(collective_on_device(&g.s[0], &ids), Some(false));
    let mut sums = Vec::new();
    g.s[0]
        .utilities()
        .logger
        .set_level(LogCategory::Collective, LogLevel::Basic);
    let early = Captured::during(|| {
        for r in 0..2 {
            if r == 1 {
                g.s[1].comm_init(ids.clone()).expect("comm_init");
            }
            let s = &mut g.s[r];
            let src = rank_words(s, r, len);
            let (sum, result) = sum_of(s, &src, &ids);
            result.unwrap_or_else(|e| panic!("rank {r}: all_reduce: {e}"));
            sums.push(sum);
        }
    });
    let why = "host staging (posted before every rank joined)";
    assert!(
        early.contains(&format!("all_reduce at rank 0 of 2: {why}")),
        "{early:?}"
    );
    let want = two_rank_sum(len);
    for (r, s) in g.s.iter_mut().enumerate() {
        let got = read(s, &sums[r], S0).unwrap_or_else(|e| panic!("rank {r}: {e}"));
        assert!(bytes_u32(&got) == want, "rank {r}: the early all_reduce");
        assert_eq!(collective_device_calls(s, &ids), Some(0), "rank {r}");
    }
    let on = collective_on_device(&g.s[0], &ids);
    assert_eq!(collective_on_device(&g.s[1], &ids), on);
    let lines = Captured::during(|| sum_and_gather(&mut g, len));
    let place = if on == Some(true) {
        "on the devices"
    } else {
        "host staging (the group is on host staging)"
    };
    assert!(
        lines.contains(&format!("all_reduce at rank 0 of 2: {place}")),
        "{lines:?}"
    );
    // The later calls (an all-reduce and an all-gather) took the settled
    // path on every rank.
    let later = if on == Some(true) { 2 } else { 0 };
    for (r, s) in g.s.iter().enumerate() {
        assert_eq!(collective_device_calls(s, &ids), Some(later), "rank {r}");
    }
}

/// A refused call takes its place in the per-call path decisions as a
/// posted one does: rank 0 refuses a call and then posts an all-reduce,
/// both before rank 1 joins; rank 1's two calls pair with them, and the
/// all-reduce takes one path on both ranks (the host, as posted before
/// rank 1 joined) and gives the right sums.
#[test]
fn a_call_refused_before_every_rank_joined_keeps_the_ranks_on_one_path() {
    let mut g = Group::open(2);
    let ids = g.ids.clone();
    let len = 100_000; // 400 KB per rank: past the device path's minimum.
    let refusal = ServerError::InvalidArgument {
        reason: "refused by the test".into(),
    };
    g.s[0].comm_init(ids.clone()).expect("comm_init");
    let _ = g.s[0].refuse_collective(refusal, ids.clone());
    let mut sums = Vec::new();
    let mut firsts = Vec::new();
    for r in 0..2 {
        let s = &mut g.s[r];
        if r == 1 {
            s.comm_init(ids.clone()).expect("comm_init");
            // Rank 1's call in the refused one's place (it fails: read
            // below).
            let src = upload(s, vec![1; 4 * len], S0);
            let (first, _) = sum_of(s, &src, &ids);
            firsts.push(first);
        }
        let src = rank_words(s, r, len);
        let (sum, result) = sum_of(s, &src, &ids);
        result.unwrap_or_else(|e| panic!("rank {r}: all_reduce: {e}"));
        sums.push(sum);
    }
    let want = two_rank_sum(len);
    for (r, s) in g.s.iter_mut().enumerate() {
        let got = read(s, &sums[r], S0).unwrap_or_else(|e| panic!("rank {r}: {e}"));
        assert!(
            bytes_u32(&got) == want,
            "rank {r}: the all_reduce after the refusal"
        );
    }
    assert!(
        read(&mut g.s[1], &firsts[0], S0).is_err(),
        "rank 1's call paired with a refusal"
    );
}

/// Bytes of rank `r`'s input: distinct per rank and position.
fn pattern(r: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (r * 64 + i + 1) as u8).collect()
}

#[test]
fn a_src_that_starts_mid_word_gives_the_same_bytes_on_either_path() {
    let mut g = Group::new(2);
    let ids = g.ids.clone();
    // 8 bytes from byte 1, 2 and 3 of each rank's slice (whole words, so a
    // device group takes them on the device, through its shifting copy).
    for from in 1..4u64 {
        let mut gathered = Vec::new();
        let mut swapped = Vec::new();
        for (r, s) in g.s.iter_mut().enumerate() {
            let whole = upload(s, pattern(r, 16), S0);
            let src = sub(&whole, from, 8);
            let gather = alloc(s, 16, S0);
            let swap = alloc(s, 8, S0);
            s.all_gather(src.binding(), gather.binding(), S0, ids.clone())
                .unwrap_or_else(|e| panic!("rank {r}: all_gather: {e}"));
            s.all_to_all(src.binding(), swap.binding(), S0, ids.clone())
                .unwrap_or_else(|e| panic!("rank {r}: all_to_all: {e}"));
            gathered.push(gather);
            swapped.push(swap);
        }
        let input = |r: usize| pattern(r, 16)[from as usize..from as usize + 8].to_vec();
        for (r, s) in g.s.iter_mut().enumerate() {
            let got = read(s, &gathered[r], S0).unwrap_or_else(|e| panic!("rank {r}: {e}"));
            let want: Vec<u8> = (0..2).flat_map(input).collect();
            assert_eq!(got.to_vec(), want, "rank {r}: all_gather from byte {from}");
            let got = read(s, &swapped[r], S0).unwrap_or_else(|e| panic!("rank {r}: {e}"));
            let want: Vec<u8> = (0..2)
                .flat_map(|j| input(j)[4 * r..4 * r + 4].to_vec())
                .collect();
            assert_eq!(got.to_vec(), want, "rank {r}: all_to_all from byte {from}");
        }
    }
}

#[test]
fn float_sums_of_tiny_values_have_the_hosts_bits() {
    // 256 KiB per rank (the device path's default smallest call), of bits
    // drawn around the denormal range: denormals, tiny normals, zeros of
    // both signs, and a few ordinary values.
    let (n, len) = (3, 1 << 16);
    let mut g = Group::new(n);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let vals: Vec<Vec<f32>> = (0..n)
        .map(|_| {
            (0..len)
                .map(|_| {
                    let r = next();
                    let exponent = match r % 8 {
                        0..=3 => 0,
                        4 | 5 => (r >> 8) % 30,
                        6 => 27 + (r >> 8) % 3,
                        _ => 100 + (r >> 8) % 40,
                    } as u32;
                    let sign = ((r >> 40) & 1) as u32;
                    let mantissa = (r >> 16) as u32 & 0x7f_ffff;
                    f32::from_bits(sign << 31 | exponent << 23 | mantissa)
                })
                .collect()
        })
        .collect();
    let want: Vec<u32> = (0..len)
        .map(|i| {
            let mut acc = vals[0][i];
            for v in &vals[1..] {
                acc += v[i];
            }
            acc.to_bits()
        })
        .collect();
    let mut dsts = Vec::new();
    for (r, s) in g.s.iter_mut().enumerate() {
        let bytes: Vec<u8> = vals[r].iter().flat_map(|x| x.to_le_bytes()).collect();
        let src = upload(s, bytes, S0);
        let dst = alloc(s, 4 * len as u64, S0);
        s.all_reduce(
            src.binding(),
            dst.binding(),
            Reduction::sum(DType::F32),
            S0,
            g.ids.clone(),
            ComputeWait::Wait,
        )
        .unwrap_or_else(|e| panic!("rank {r}: {e}"));
        dsts.push(dst);
    }
    for (r, s) in g.s.iter_mut().enumerate() {
        let got = bytes_u32(&read(s, &dsts[r], S0).unwrap_or_else(|e| panic!("rank {r}: {e}")));
        let wrong = (0..len).find(|&i| got[i] != want[i]);
        assert!(
            wrong.is_none(),
            "rank {r}: element {wrong:?}: {:#010x} where the host adds to {:#010x} ({:?})",
            wrong.map_or(0, |i| got[i]),
            wrong.map_or(0, |i| want[i]),
            wrong.map(|i| (0..n).map(|q| vals[q][i].to_bits()).collect::<Vec<_>>())
        );
    }
}

/// The collective log's lines (`compute::collective` events) of what a
/// closure does on this thread.
struct Captured(std::sync::Mutex<Vec<String>>);

impl Captured {
    fn during(f: impl FnOnce()) -> Vec<String> {
        let captured = std::sync::Arc::new(Captured(std::sync::Mutex::new(Vec::new())));
        tracing::subscriber::with_default(std::sync::Arc::clone(&captured), f);
        captured.0.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// Collects an event's `message` field.
struct Message<'a>(&'a mut String);

impl tracing::field::Visit for Message<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Captured {
    fn enabled(&self, meta: &tracing::Metadata<'_>) -> bool {
        meta.target() == "compute::collective"
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut line = String::new();
        event.record(&mut Message(&mut line));
        if let Ok(mut lines) = self.0.lock() {
            lines.push(line);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
