"""The API versions each tshark release decodes, as facts recorded once per release.

tshark 4.0: the `kafka_apis[]` table of epan/dissectors/packet-kafka.c on Wireshark's
release-4.0 branch (https://gitlab.com/wireshark/wireshark/-/blob/release-4.0/epan/dissectors/
packet-kafka.c), which the tshark 4.0 binary also prints in its own notes ("Unsupported Fetch
version. Supports v0-11."; a test checks the two agree). API keys past 47 are unknown to it.
"""

SUPPORTED = {
    "4.0": {
        0: (0, 8),  # Produce
        1: (0, 11),  # Fetch
        2: (0, 5),  # ListOffsets
        3: (0, 9),  # Metadata
        4: (0, 4),  # LeaderAndIsr
        5: (0, 2),  # StopReplica
        6: (0, 6),  # UpdateMetadata
        7: (0, 3),  # ControlledShutdown
        8: (0, 8),  # OffsetCommit
        9: (0, 7),  # OffsetFetch
        10: (0, 3),  # FindCoordinator
        11: (0, 7),  # JoinGroup
        12: (0, 4),  # Heartbeat
        13: (0, 4),  # LeaveGroup
        14: (0, 5),  # SyncGroup
        15: (0, 5),  # DescribeGroups
        16: (0, 3),  # ListGroups
        17: (0, 1),  # SaslHandshake
        18: (0, 3),  # ApiVersions
        19: (0, 5),  # CreateTopics
        20: (0, 4),  # DeleteTopics
        21: (0, 1),  # DeleteRecords
        22: (0, 3),  # InitProducerId
        23: (0, 3),  # OffsetForLeaderEpoch
        24: (0, 1),  # AddPartitionsToTxn
        25: (0, 1),  # AddOffsetsToTxn
        26: (0, 1),  # EndTxn
        27: (0, 0),  # WriteTxnMarkers
        28: (0, 3),  # TxnOffsetCommit
        29: (0, 2),  # DescribeAcls
        30: (0, 2),  # CreateAcls
        31: (0, 2),  # DeleteAcls
        32: (0, 2),  # DescribeConfigs
        33: (0, 1),  # AlterConfigs
        34: (0, 1),  # AlterReplicaLogDirs
        35: (0, 1),  # DescribeLogDirs
        36: (0, 2),  # SaslAuthenticate
        37: (0, 2),  # CreatePartitions
        38: (0, 2),  # CreateDelegationToken
        39: (0, 2),  # RenewDelegationToken
        40: (0, 2),  # ExpireDelegationToken
        41: (0, 2),  # DescribeDelegationToken
        42: (0, 2),  # DeleteGroups
        43: (0, 2),  # ElectLeaders
        44: (0, 1),  # IncrementalAlterConfigs
        45: (0, 0),  # AlterPartitionReassignments
        46: (0, 0),  # ListPartitionReassignments
        47: (0, 0),  # OffsetDelete
    },
}


def supported(release, api_key, api_version):
    """Whether tshark `release` ("4.0") decodes the body of this API key and version; None when
    the release's table is not recorded here."""
    table = SUPPORTED.get(release)
    if table is None:
        return None
    low, high = table.get(api_key, (0, -1))
    return api_version is not None and low <= api_version <= high
