use verso_rpc::RpcMethod;

#[derive(RpcMethod, Debug)]
#[rpc(since = "1.0", returns = String)]
pub struct Ping {
    pub host: String,
}

fn main() {}
