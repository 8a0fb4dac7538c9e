use verso_rpc::RpcMethod;

#[derive(RpcMethod, Debug)]
#[rpc(since = "1.0")]
pub struct Ping<T> {
    pub host: T,
}

fn main() {}
