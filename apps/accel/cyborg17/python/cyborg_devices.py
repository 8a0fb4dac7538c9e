"""Devices as Cyborg 17's drivers report them, built from Cyborg's own driver objects,
for the test scripts beside this file (`cyborg_conductor.py fill`, `cyborg_peer.py
send --with-nic`)."""

import json

from cyborg.accelerator.common import utils
from cyborg.objects.driver_objects import driver_device
from cyborg.objects.driver_objects.driver_attach_handle import DriverAttachHandle
from cyborg.objects.driver_objects.driver_attribute import DriverAttribute
from cyborg.objects.driver_objects.driver_controlpath_id import DriverControlPathID
from cyborg.objects.driver_objects.driver_deployable import DriverDeployable


def nic_with_vfs(host):
    """An SR-IOV NIC as Cyborg's Intel NIC driver reports one (`nic/intel/sysinfo.py`):
    each virtual function a deployable of its own, with one PCI handle (its address
    and physical network, `pci_str_to_json`) and its own `rc` and trait attributes."""
    deployables = []
    for vf, physnet in ((1, "physnet1"), (2, "physnet2")):
        address = "0000:5e:00.%d" % vf
        handle = DriverAttachHandle(
            attach_type="PCI",
            attach_info=utils.pci_str_to_json(address, physnet),
            in_use=False,
        )
        attributes = [
            DriverAttribute(key="rc", value="CUSTOM_NIC"),
            DriverAttribute(key="trait0", value="CUSTOM_PHYSNET_%s" % physnet.upper()),
        ]
        deployables.append(
            DriverDeployable(
                name="%s_nic_vf%d" % (host, vf),
                num_accelerators=1,
                driver_name="intel",
                attach_handle_list=[handle],
                attribute_list=attributes,
            )
        )
    return driver_device.DriverDevice(
        vendor="8086",
        model="1592",
        type="NIC",
        std_board_info=json.dumps({"device_id": "0x1592", "class": "Fake NIC"}),
        vendor_board_info="fake_nic_info",
        stub=False,
        controlpath_id=DriverControlPathID(
            cpid_type="PCI", cpid_info=utils.pci_str_to_json("0000:5e:00.0")
        ),
        deployable_list=deployables,
    )
