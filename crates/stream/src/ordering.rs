//! The submit-before rule (see the module doc of `scheduler`): what an
//! operation's use of a page makes submit first, for work on a stream and
//! for host writes that land before the next submit.

use compute_runtime::{StorageHandle, StreamId};
use hashbrown::HashMap;

use super::{
    Access, SchedulerMultiStream, SchedulerStreamBackend, StreamState, Submitted, Urgency, Use,
};

impl<B: SchedulerStreamBackend> SchedulerMultiStream<B> {
    fn pending<S>(streams: &HashMap<StreamId, StreamState<S>>, u: &Use) -> bool {
        streams
            .get(&u.stream)
            .is_some_and(|s| s.batch == u.batch && s.tasks > 0)
    }

    /// Submits what must run before `stream` may use `ranges` as given, then
    /// records the uses as part of `stream`'s current batch.
    pub fn prepare(&mut self, stream: StreamId, ranges: &[(StorageHandle, Access)]) {
        self.ensure(stream);
        let mut to_submit: Vec<StreamId> = Vec::new();
        for (range, access) in ranges {
            let Some(uses) = self.pages.get_mut(&range.id) else {
                continue;
            };
            uses.retain(|u| Self::pending(&self.streams, u));
            let end = range.offset.saturating_add(range.size);
            for u in uses.iter() {
                let conflict = u.stream != stream
                    && (u.write || *access == Access::Write)
                    && u.overlaps(range.offset, end);
                if conflict && !to_submit.contains(&u.stream) {
                    to_submit.push(u.stream);
                }
            }
        }
        for other in to_submit {
            if self.submit_with(other, Urgency::Before) == Some(Submitted::HandedOff)
                && let Some(state) = self.streams.get_mut(&stream)
            {
                self.backend.follow(stream, &mut state.inner);
            }
        }
        let batch = self.streams.get(&stream).map_or(0, |s| s.batch);
        for (range, access) in ranges {
            let uses = self.pages.entry(range.id).or_default();
            let (start, end) = (range.offset, range.offset.saturating_add(range.size));
            let write = *access == Access::Write;
            match uses.iter_mut().find(|u| {
                u.stream == stream && u.start == start && u.end == end && u.write == write
            }) {
                Some(u) => u.batch = batch,
                None => uses.push(Use {
                    start,
                    end,
                    stream,
                    batch,
                    write,
                }),
            }
        }
    }

    /// Submits every stream whose pending batch touches `ranges`, so a host
    /// write that lands before the next submit cannot overtake them.
    pub fn prepare_host_write(&mut self, ranges: &[StorageHandle]) {
        for s in self.pending_users(ranges) {
            self.submit(s);
        }
    }

    /// Submits every stream whose pending batch touches `ranges` if that
    /// needs no wait; `false` when one of them is held back (a host write
    /// that must land after it then goes on a stream, behind it).
    pub fn try_prepare_host_write(&mut self, ranges: &[StorageHandle]) -> bool {
        let mut clear = true;
        for s in self.pending_users(ranges) {
            clear &= self.submit_with(s, Urgency::WhenReady) != Some(Submitted::Held);
        }
        clear
    }

    /// Streams whose pending batch touches `ranges`.
    fn pending_users(&mut self, ranges: &[StorageHandle]) -> Vec<StreamId> {
        let mut users: Vec<StreamId> = Vec::new();
        for range in ranges {
            let Some(uses) = self.pages.get_mut(&range.id) else {
                continue;
            };
            uses.retain(|u| Self::pending(&self.streams, u));
            let end = range.offset.saturating_add(range.size);
            for u in uses.iter() {
                if u.overlaps(range.offset, end) && !users.contains(&u.stream) {
                    users.push(u.stream);
                }
            }
        }
        users
    }
}
