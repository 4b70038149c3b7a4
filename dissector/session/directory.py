"""What one connection learns that others need: topic names by id, group protocol types."""

from ..protocol.apikeys import CREATE_TOPICS, JOIN_GROUP, METADATA
from ..tls.keylog import KeyLog

NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # the all-zero uuid: "no id"


class Directory:
    """Capture-wide facts, learned in capture order from responses as they complete."""

    def __init__(self):
        self.topic_names = {}  # topic id (Kafka's base64 text) -> name
        self.group_types = {}  # group id -> protocol type ("consumer", "connect", ...)
        # Broker endpoints ((ip, port)) that connections seen so far proved to speak Kafka:
        # another connection to one is Kafka even when its first request is odd.
        self.kafka_endpoints = set()
        # Secrets of TLS sessions by client random: a key log's, and those a pcapng carries.
        self.tls_keys = KeyLog()

    def learn(self, api_key, request, response):
        if response and api_key in (METADATA, CREATE_TOPICS):
            for topic in response.get("Topics") or ():
                topic_id, name = topic.get("TopicId"), topic.get("Name")
                if topic_id and name and topic_id != NO_TOPIC_ID:
                    self.topic_names[topic_id] = name
        if request and api_key == JOIN_GROUP and request.get("ProtocolType"):
            self.group_types[request["GroupId"]] = request["ProtocolType"]

    def group_type(self, api_key, request, response):
        """The protocol type of the group a JoinGroup/SyncGroup exchange is about."""
        for body in (request, response):
            if body and body.get("ProtocolType"):
                return body["ProtocolType"]
        return self.group_types.get((request or {}).get("GroupId"))

    def topic(self, topic_id):
        """A topic's name when an earlier Metadata response gave it, else the id itself."""
        return self.topic_names.get(topic_id, topic_id)
