use verso_rpc::RpcMethod;

#[derive(RpcMethod, Debug)]
#[rpc(since = "1.0")]
pub enum Ping {
    Host(String),
}

fn main() {}
