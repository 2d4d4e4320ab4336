//! A multi-producer, single-consumer queue that is safe between threads of different
//! real-time priorities on one CPU.
//!
//! Why not `std::sync::mpsc`: its list channel makes a sender or the receiver *spin* (with
//! `sched_yield`) while another thread finishes a slot or installs the next block. Under
//! `SCHED_FIFO`, `sched_yield` never gives the CPU to a lower-priority thread, so a
//! higher-priority thread spinning on a preempted lower-priority one livelocks the CPU (seen:
//! the simulator's engine thread at FIFO 11 spinning forever on its HTTP thread at FIFO 10).
//!
//! Here no operation ever waits for another thread's progress: `push` is a CAS loop on a
//! Treiber stack (it retries only when another push *succeeded*), the consumer takes everything
//! with one `swap` and reverses it (so per-producer order is kept), and blocking uses
//! park/unpark (a futex, never a spin).

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

struct Node<T> {
    next: *mut Node<T>,
    val: T,
}

struct Shared<T> {
    head: AtomicPtr<Node<T>>,
    senders: AtomicUsize,
    consumer: OnceLock<Thread>,
    receiver_alive: AtomicBool,
}

// SAFETY: nodes are only reachable through `head` and move values of type T between threads.
unsafe impl<T: Send> Send for Shared<T> {}
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        let mut p = *self.head.get_mut();
        while !p.is_null() {
            // SAFETY: we own every node still linked (no other reference to `Shared` exists).
            let b = unsafe { Box::from_raw(p) };
            p = b.next;
        }
    }
}

pub struct Sender<T> {
    s: Arc<Shared<T>>,
}

pub struct Receiver<T> {
    s: Arc<Shared<T>>,
}

/// A new queue.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let s = Arc::new(Shared {
        head: AtomicPtr::new(std::ptr::null_mut()),
        senders: AtomicUsize::new(1),
        consumer: OnceLock::new(),
        receiver_alive: AtomicBool::new(true),
    });
    (Sender { s: s.clone() }, Receiver { s })
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.s.senders.fetch_add(1, SeqCst);
        Sender { s: self.s.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if self.s.senders.fetch_sub(1, SeqCst) == 1
            && let Some(t) = self.s.consumer.get()
        {
            t.unpark();
        }
    }
}

/// The receiver is gone.
#[derive(Debug, PartialEq, Eq)]
pub struct Disconnected;

impl<T> Sender<T> {
    /// Never blocks, never waits for another thread.
    pub fn send(&self, val: T) -> Result<(), Disconnected> {
        if !self.s.receiver_alive.load(SeqCst) {
            return Err(Disconnected);
        }
        let n = Box::into_raw(Box::new(Node {
            next: std::ptr::null_mut(),
            val,
        }));
        let mut h = self.s.head.load(SeqCst);
        loop {
            // SAFETY: `n` is ours until the CAS publishes it.
            unsafe { (*n).next = h };
            match self.s.head.compare_exchange_weak(h, n, SeqCst, SeqCst) {
                Ok(_) => break,
                Err(cur) => h = cur,
            }
        }
        if h.is_null()
            && let Some(t) = self.s.consumer.get()
        {
            t.unpark();
        }
        Ok(())
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.s.receiver_alive.store(false, SeqCst);
    }
}

/// Why a receive returned nothing.
#[derive(Debug, PartialEq, Eq)]
pub enum RecvError {
    Timeout,
    /// Every sender is gone and the queue is empty.
    Closed,
}

impl<T> Receiver<T> {
    fn take_all(&self, out: &mut Vec<T>) -> usize {
        let mut p = self.s.head.swap(std::ptr::null_mut(), SeqCst);
        let start = out.len();
        while !p.is_null() {
            // SAFETY: the swap gave us exclusive ownership of the whole list.
            let b = unsafe { Box::from_raw(p) };
            p = b.next;
            out.push(b.val);
        }
        out[start..].reverse();
        out.len() - start
    }

    /// Appends everything queued (in push order) to `out` without blocking.
    pub fn try_recv_all(&self, out: &mut Vec<T>) -> usize {
        self.take_all(out)
    }

    /// Waits up to `timeout` for at least one item and appends everything queued to `out`.
    /// Must always be called from the same (consumer) thread.
    pub fn recv_all_timeout(
        &self,
        out: &mut Vec<T>,
        timeout: Duration,
    ) -> Result<usize, RecvError> {
        let _ = self.s.consumer.set(std::thread::current());
        let deadline = Instant::now() + timeout;
        loop {
            let n = self.take_all(out);
            if n > 0 {
                return Ok(n);
            }
            if self.s.senders.load(SeqCst) == 0 {
                // A last push may have raced the check above.
                let n = self.take_all(out);
                return if n > 0 { Ok(n) } else { Err(RecvError::Closed) };
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(RecvError::Timeout);
            }
            std::thread::park_timeout(deadline - now);
        }
    }

    /// Blocks until at least one item arrives (appending everything queued) or all senders are
    /// gone.
    pub fn recv_all(&self, out: &mut Vec<T>) -> Result<usize, RecvError> {
        loop {
            match self.recv_all_timeout(out, Duration::from_secs(3600)) {
                Err(RecvError::Timeout) => continue,
                r => return r,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_per_producer_order_and_closes() {
        let (tx, rx) = channel::<(u32, u32)>();
        let producers: Vec<_> = (0..4)
            .map(|p| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for i in 0..50_000 {
                        tx.send((p, i)).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let mut all = Vec::new();
        let mut buf = Vec::new();
        loop {
            match rx.recv_all(&mut buf) {
                Ok(_) => all.append(&mut buf),
                Err(e) => {
                    assert_eq!(e, RecvError::Closed);
                    break;
                }
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(all.len(), 200_000);
        let mut next = [0u32; 4];
        for (p, i) in all {
            assert_eq!(i, next[p as usize]);
            next[p as usize] += 1;
        }
    }

    #[test]
    fn timeout_and_disconnect() {
        let (tx, rx) = channel::<u8>();
        let mut b = Vec::new();
        assert_eq!(
            rx.recv_all_timeout(&mut b, Duration::from_millis(20)),
            Err(RecvError::Timeout)
        );
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            tx.send(7).unwrap();
        });
        assert_eq!(rx.recv_all_timeout(&mut b, Duration::from_secs(5)), Ok(1));
        assert_eq!(b, vec![7]);
        t.join().unwrap();
        let (tx, rx) = channel::<String>();
        tx.send("leaks nothing".into()).unwrap();
        drop(rx);
        assert_eq!(tx.send("x".into()), Err(Disconnected));
    }
}
