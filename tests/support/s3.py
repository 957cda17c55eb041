"""A loopback S3 server (moto's server mode) for the TensorStore tests: it
listens on 127.0.0.1 only and the credentials are fake."""
import contextlib
import os
import socket

HOST = "127.0.0.1"  # never any other address
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "strideweave-test",
    "AWS_SECRET_ACCESS_KEY": "strideweave-test",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",  # no instance-metadata lookups
}


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def s3_server():
    """Starts a moto server on the loopback interface with CREDENTIALS in the
    environment; yields (endpoint, boto3 client), stops it and restores the
    environment after."""
    import boto3
    from moto.server import ThreadedMotoServer

    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    port = free_port()
    server = ThreadedMotoServer(ip_address=HOST, port=port, verbose=False)
    server.start()
    endpoint = f"http://{HOST}:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    try:
        yield endpoint, client
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def spec(endpoint, bucket, path):
    """A zarr v3 TensorStore spec of an array at s3://bucket/path on endpoint."""
    return {"driver": "zarr3",
            "kvstore": {"driver": "s3", "bucket": bucket, "path": path, "endpoint": endpoint,
                        "aws_region": "us-east-1"}}
