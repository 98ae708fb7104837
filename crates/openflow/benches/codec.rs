//! Decode and encode throughput over the messages `ovs-ofctl` sent in the oracle tests
//! (`tests/data/ovs_ofctl_messages.txt`): flow mods of every version dominate.

use openflow::{Framer, Msg};

fn main() {
    divan::main();
}

fn recorded() -> Vec<Vec<u8>> {
    include_str!("../tests/data/ovs_ofctl_messages.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| hex::decode(l).expect("hex"))
        .collect()
}

/// Frames and decodes the whole recording as one stream.
#[divan::bench]
fn frame_and_decode(b: divan::Bencher<'_, '_>) {
    let stream: Vec<u8> = recorded().concat();
    let n = recorded().len();
    b.counter(divan::counter::ItemsCount::new(n)).bench(|| {
        let mut f = Framer::new();
        f.feed(divan::black_box(&stream));
        let mut ok = 0;
        while let Ok(Some(m)) = f.next_message() {
            ok += usize::from(Msg::decode(&m).is_ok());
        }
        ok
    });
}

/// Encodes every decoded message.
#[divan::bench]
fn encode(b: divan::Bencher<'_, '_>) {
    let msgs: Vec<Msg> = recorded()
        .iter()
        .filter_map(|m| Msg::decode(m).ok())
        .collect();
    b.counter(divan::counter::ItemsCount::new(msgs.len()))
        .bench(|| {
            msgs.iter()
                .map(|m| m.encode().map_or(0, |b| b.len()))
                .sum::<usize>()
        });
}
