//! The byte path: any bytes given to `from_primitive_slice` of every class of the Cyborg
//! model are decoded or refused with an error, never a panic or a stack overflow. A
//! decoded object's own bytes decode to an equal object.
#![no_main]

use cyborg_model::{
    AttachHandle, AttachHandleList, Deployable, DeployableList, Device, DeviceList,
};
use libfuzzer_sys::fuzz_target;
use verso::VersionedObject;

fn check<O: VersionedObject + PartialEq + std::fmt::Debug>(data: &[u8]) {
    let Ok(obj) = O::from_primitive_slice(data) else {
        return;
    };
    let bytes = obj
        .to_primitive_bytes(verso::Target::Own)
        .expect("encodes at its own version");
    let back = O::from_primitive_slice(&bytes).expect("an object's own bytes decode");
    assert_eq!(
        back,
        obj,
        "decode(encode(x)) != x for {}",
        String::from_utf8_lossy(&bytes)
    );
}

fuzz_target!(|data: &[u8]| {
    check::<Device>(data);
    check::<Deployable>(data);
    check::<AttachHandle>(data);
    check::<DeviceList>(data);
    check::<AttachHandleList>(data);
    check::<DeployableList>(data);
});
