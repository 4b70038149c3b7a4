"""Which Kafka schema field each tshark Kafka field stands for: the mapping, as data.

tshark reuses one field name for several Kafka fields (`kafka.offset` is a Produce response's
base offset, a Fetch request's fetch offset, a Fetch response's high watermark, a batch's base
offset and a record's offset), so a name maps to a tuple of Kafka fields: the ones it stands
for in that API and direction, which the comparison takes in wire order. `COMMON` holds the
names that mean the same everywhere; `BY_API` what a name means in one API and direction.

Kafka fields are the names of Apache Kafka's message definitions (the keys of the decoded
bodies); record sets use the names of Kafka's record format: `RecordBatch.*`, `Record.*`,
`Header.*` (magic 2) and `Message.*` (magic 0 and 1). `_tag`/`_tag_data` are the number and
bytes of a tagged field. An empty tuple means the value stands for nothing in the body.

Kinds say how to read tshark's value: `int` (its displayed number; booleans and enums show
as numbers), `string` ("[ Null ]" is null), `bytes` (the bytes tshark read), `raw_uint` /
`raw_int` (the field's bytes as a number: CRCs, and batch timestamps, which tshark 4.0
displays as dates from the wrong unit), `date_ms` (a displayed date, as milliseconds),
`embedded` (bytes of the consumer protocol, compared decoded), `sasl` (a SASL token),
`tag_data` (a tagged field's bytes).
"""

from dataclasses import dataclass

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP = 8, 9, 10, 11
SYNC_GROUP, DESCRIBE_GROUPS, SASL_HANDSHAKE = 14, 15, 17
CREATE_TOPICS, DELETE_TOPICS, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN = 19, 20, 22, 24
END_TXN, SASL_AUTHENTICATE = 26, 36


@dataclass(frozen=True)
class Spec:
    kind: str
    kafka: tuple


def _s(kind, *kafka):
    return Spec(kind, kafka)


COMMON = {
    "kafka.error": _s("int", "ErrorCode"),
    "kafka.error_message": _s("string", "ErrorMessage"),
    "kafka.throttle_time": _s("int", "ThrottleTimeMs"),
    "kafka.topic_name": _s("string", "Name"),
    "kafka.partition_id": _s("int", "PartitionIndex"),
    "kafka.timeout": _s("int", "TimeoutMs"),
    "kafka.transactional_id": _s("string", "TransactionalId"),
    "kafka.producer_id": _s("int", "ProducerId"),
    "kafka.producer_epoch": _s("int", "ProducerEpoch"),
    "kafka.consumer_group": _s("string", "GroupId"),
    "kafka.consumer_group_instance": _s("string", "GroupInstanceId"),
    "kafka.member_id": _s("string", "MemberId"),
    "kafka.client_id": _s("string", "ClientId"),  # in bodies (the header's is compared apart)
    "kafka.client_host": _s("string", "ClientHost"),
    "kafka.generation_id": _s("int", "GenerationId"),
    "kafka.protocol_type": _s("string", "ProtocolType"),
    "kafka.protocol_name": _s("string", "ProtocolName"),
    "kafka.session_timeout": _s("int", "SessionTimeoutMs"),
    "kafka.rebalance_timeout": _s("int", "RebalanceTimeoutMs"),
    "kafka.group_leader_id": _s("string", "Leader"),
    "kafka.group_state": _s("string", "GroupState"),
    "kafka.group_authorized_ops": _s("raw_int", "AuthorizedOperations"),
    "kafka.topic_authorized_ops": _s("raw_int", "TopicAuthorizedOperations"),
    "kafka.cluster_authorized_ops": _s("raw_int", "ClusterAuthorizedOperations"),
    "kafka.include_cluster_authorized_ops": _s("int", "IncludeClusterAuthorizedOperations"),
    "kafka.include_topic_authorized_ops": _s("int", "IncludeTopicAuthorizedOperations"),
    "kafka.include_group_authorized_ops": _s("int", "IncludeAuthorizedOperations"),
    "kafka.coordinator_key": _s("string", "Key"),
    "kafka.coordinator_type": _s("int", "KeyType"),
    "kafka.node_id": _s("int", "NodeId"),
    "kafka.host": _s("string", "Host"),
    "kafka.port": _s("int", "Port"),
    "kafka.rack": _s("string", "Rack"),
    "kafka.cluster_id": _s("string", "ClusterId"),
    "kafka.leader_id": _s("int", "LeaderId"),
    "kafka.leader_epoch": _s("int", "LeaderEpoch"),
    "kafka.isr_id": _s("int", "IsrNodes"),
    "kafka.offline_id": _s("int", "OfflineReplicas"),
    "kafka.is_internal": _s("int", "IsInternal"),
    "kafka.allow_auto_topic_creation": _s("int", "AllowAutoTopicCreation"),
    "kafka.isolation_level": _s("int", "IsolationLevel"),
    "kafka.log_start_offset": _s("int", "LogStartOffset"),
    "kafka.last_stable_offset": _s("int", "LastStableOffset"),
    "kafka.api_versions.api_key": _s("int", "ApiKey"),
    "kafka.api_versions.min_version": _s("int", "MinVersion"),
    "kafka.api_versions.max_version": _s("int", "MaxVersion"),
    "kafka.client_software_name": _s("string", "ClientSoftwareName"),
    "kafka.client_software_version": _s("string", "ClientSoftwareVersion"),
    "kafka.session_lifetime_ms": _s("int", "SessionLifetimeMs"),
    "kafka.num_partitions": _s("int", "NumPartitions"),
    "kafka.replication_factor": _s("int", "ReplicationFactor"),
    "kafka.config_resource_type": _s("int", "ResourceType"),
    "kafka.config_resource_name": _s("string", "ResourceName"),
    "kafka.config_include_synonyms": _s("int", "IncludeSynonyms"),
    "kafka.retention_time": _s("int", "RetentionTimeMs"),
    "kafka.transaction_timeout": _s("int", "TransactionTimeoutMs"),
    "kafka.fetch_session_id": _s("int", "SessionId"),
    "kafka.fetch_session_epoch": _s("int", "SessionEpoch"),
    "kafka.max_wait_time": _s("int", "MaxWaitMs"),
    "kafka.min_bytes": _s("int", "MinBytes"),
    "kafka.max_bytes": _s("int", "MaxBytes"),
    "kafka.controller_epoch": _s("int", "ControllerEpoch"),
    "kafka.tagged_field_tag": _s("int", "_tag"),
    "kafka.tagged_field_data": _s("tag_data", "_tag_data"),
    # Record sets: batches (magic 2), their records and headers, messages (magic 0 and 1)
    "kafka.batch_crc": _s("raw_uint", "RecordBatch.crc"),
    "kafka.batch_codec": _s("int", "RecordBatch.attributes.compression"),
    "kafka.batch_timestamp_type": _s("int", "RecordBatch.attributes.timestampType"),
    "kafka.batch_transactional": _s("int", "RecordBatch.attributes.isTransactional"),
    "kafka.batch_control_batch": _s("int", "RecordBatch.attributes.isControlBatch"),
    "kafka.batch_last_offset_delta": _s("int", "RecordBatch.lastOffsetDelta"),
    "kafka.batch_first_timestamp": _s("raw_int", "RecordBatch.baseTimestamp"),
    "kafka.batch_last_timestamp": _s("raw_int", "RecordBatch.maxTimestamp"),
    "kafka.batch_base_sequence": _s("int", "RecordBatch.baseSequence"),
    "kafka.batch_size": _s("int", "RecordBatch.recordCount"),
    "kafka.message_magic": _s("int", "RecordBatch.magic", "Message.magic"),
    "kafka.message_size": _s("int", "RecordBatch.batchLength", "Message.messageSize"),
    "kafka.message_crc": _s("raw_uint", "Message.crc"),
    "kafka.message_codec": _s("int", "Message.attributes.compression"),
    "kafka.message_timestamp_type": _s("int", "Message.attributes.timestampType"),
    "kafka.message_timestamp": _s("date_ms", "Record.timestamp", "Message.timestamp"),
    "kafka.message_key": _s("bytes", "Record.key", "Message.key"),
    "kafka.message_value": _s("bytes", "Record.value", "Message.value"),
    "kafka.record_attributes": _s("int", "Record.attributes"),
    "kafka.header_key": _s("string", "Header.headerKey"),
    "kafka.header_value": _s("bytes", "Header.value"),
}

# Inside record sets tshark names the batch's leader epoch, producer id and epoch as the
# body-level fields of the same name, and batch and record offsets `kafka.offset`.
_RECORD_SETS = {
    "kafka.leader_epoch": _s("int", "RecordBatch.partitionLeaderEpoch"),
    "kafka.producer_id": _s("int", "ProducerId", "RecordBatch.producerId"),
    "kafka.producer_epoch": _s("int", "RecordBatch.producerEpoch"),
}

BY_API = {
    (PRODUCE, "request"): {
        **_RECORD_SETS,
        "kafka.partition_id": _s("int", "Index"),
        "kafka.required_acks": _s("int", "Acks"),
        "kafka.offset": _s("int", "RecordBatch.baseOffset", "Record.offset", "Message.offset"),
    },
    (PRODUCE, "response"): {
        "kafka.partition_id": _s("int", "Index"),
        "kafka.offset": _s("int", "BaseOffset"),
        "kafka.offset_time": _s("int", "LogAppendTimeMs"),
    },
    (FETCH, "request"): {
        "kafka.topic_name": _s("string", "Topic"),
        "kafka.partition_id": _s("int", "Partition"),
        "kafka.replica_id": _s("int", "ReplicaId"),
        "kafka.leader_epoch": _s("int", "CurrentLeaderEpoch"),
        "kafka.offset": _s("int", "FetchOffset"),
        "kafka.max_bytes": _s("int", "MaxBytes", "PartitionMaxBytes"),
        "kafka.forgotten_topic_name": _s("string", "Topic"),
        "kafka.forgotten_topic_partition": _s("int", "Partitions"),
        "kafka.rack": _s("string", "RackId"),
    },
    (FETCH, "response"): {
        **_RECORD_SETS,
        "kafka.topic_name": _s("string", "Topic"),
        "kafka.replica_id": _s("int", "PreferredReadReplica"),
        "kafka.offset": _s(
            "int",
            "HighWatermark",
            "FirstOffset",
            "RecordBatch.baseOffset",
            "Record.offset",
            "Message.offset",
        ),
    },
    (LIST_OFFSETS, "request"): {
        "kafka.replica_id": _s("int", "ReplicaId"),
        "kafka.leader_epoch": _s("int", "CurrentLeaderEpoch"),
        "kafka.offset_time": _s("int", "Timestamp"),
        "kafka.max_offsets": _s("int", "MaxNumOffsets"),
    },
    (LIST_OFFSETS, "response"): {
        "kafka.offset": _s("int", "Offset", "OldStyleOffsets"),
        "kafka.offset_time": _s("int", "Timestamp"),
    },
    (METADATA, "response"): {
        "kafka.node_id": _s("int", "NodeId", "ControllerId"),
        "kafka.replica_id": _s("int", "ReplicaNodes"),
    },
    (OFFSET_COMMIT, "request"): {
        "kafka.generation_id": _s("int", "GenerationIdOrMemberEpoch", "GenerationId"),
        "kafka.offset": _s("int", "CommittedOffset"),
        "kafka.leader_epoch": _s("int", "CommittedLeaderEpoch"),
        "kafka.metadata": _s("string", "CommittedMetadata"),
        "kafka.commit_timestamp": _s("int", "CommitTimestamp"),
    },
    (OFFSET_FETCH, "request"): {
        "kafka.partition_id": _s("int", "PartitionIndexes"),
    },
    (OFFSET_FETCH, "response"): {
        "kafka.offset": _s("int", "CommittedOffset"),
        "kafka.leader_epoch": _s("int", "CommittedLeaderEpoch"),
        "kafka.metadata": _s("string", "Metadata"),
    },
    (JOIN_GROUP, "request"): {
        "kafka.protocol_name": _s("string", "Name"),
        "kafka.protocol_metadata": _s("embedded", "Metadata"),
    },
    (JOIN_GROUP, "response"): {
        "kafka.member_metadata": _s("embedded", "Metadata"),
    },
    (SYNC_GROUP, "request"): {
        "kafka.member_assignment": _s("embedded", "Assignment"),
    },
    (SYNC_GROUP, "response"): {
        "kafka.member_assignment": _s("embedded", "Assignment"),
    },
    (DESCRIBE_GROUPS, "request"): {
        "kafka.consumer_group": _s("string", "Groups"),
    },
    (DESCRIBE_GROUPS, "response"): {
        "kafka.protocol_name": _s("string", "ProtocolData"),
        "kafka.member_metadata": _s("embedded", "MemberMetadata"),
        "kafka.member_assignment": _s("embedded", "MemberAssignment"),
    },
    (SASL_HANDSHAKE, "request"): {
        "kafka.sasl_mechanism": _s("string", "Mechanism"),
    },
    (SASL_HANDSHAKE, "response"): {
        "kafka.sasl_mechanism": _s("string", "Mechanisms"),
    },
    (SASL_AUTHENTICATE, "request"): {
        "kafka.sasl_authentication": _s("sasl", "AuthBytes"),
    },
    (SASL_AUTHENTICATE, "response"): {
        "kafka.sasl_authentication": _s("sasl", "AuthBytes"),
    },
    (CREATE_TOPICS, "request"): {
        # CreateTopics v0-v4 spell these two in lower camel case in Kafka's definitions
        "kafka.timeout": _s("int", "timeoutMs", "TimeoutMs"),
        "kafka.validate_only": _s("int", "validateOnly", "ValidateOnly"),
    },
    (DELETE_TOPICS, "request"): {
        "kafka.topic_name": _s("string", "TopicNames", "Name"),
    },
    # AddPartitionsToTxn v4 renamed the fields of v0-v3 ("V3AndBelow...")
    (ADD_PARTITIONS_TO_TXN, "request"): {
        "kafka.transactional_id": _s("string", "V3AndBelowTransactionalId"),
        "kafka.producer_id": _s("int", "V3AndBelowProducerId"),
        "kafka.producer_epoch": _s("int", "V3AndBelowProducerEpoch"),
        "kafka.partition_id": _s("int", "Partitions"),
    },
    (ADD_PARTITIONS_TO_TXN, "response"): {
        "kafka.error": _s("int", "PartitionErrorCode"),
    },
    (END_TXN, "request"): {
        "kafka.transaction_result": _s("int", "Committed"),
    },
}


def lookup(api_key, side, name):
    """The Spec of tshark field `name` in this API key and direction, or None if unmapped."""
    specific = BY_API.get((api_key, side), {})
    return specific.get(name) or COMMON.get(name)
