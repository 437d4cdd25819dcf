"""A minimal OTLP/HTTP traces receiver writing what the collector's file exporter writes.

POST /v1/traces with an ExportTraceServiceRequest (application/x-protobuf) is
decoded with opentelemetry-proto and appended to OUT as one compact JSON line
(OTLP JSON: lowerCamelCase keys, enums as integers, int64 as strings, default
fields omitted); protobuf's JSON mapping writes the bytes ids in base64, the
collector (and the OTLP spec) in hex, so traceId/spanId/parentSpanId are
re-encoded as hex.
"""

import base64
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

OUT = sys.argv[2]
IDS = ("traceId", "spanId", "parentSpanId")


def hex_ids(node):
    """Walk the dict, turning base64 ids into hex as the collector writes them."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in IDS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            hex_ids(item)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        doc = json_format.MessageToDict(request, use_integers_for_enums=True)
        hex_ids(doc)
        with open(OUT, "a") as out:
            out.write(json.dumps(doc, separators=(",", ":")) + "\n")
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
