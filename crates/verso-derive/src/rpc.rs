//! `#[derive(RpcMethod)]`: describes an RPC method's argument struct for `verso-rpc`.
//! Every behaviour (versions sent, checks, encoding) lives in `verso_rpc::method`.

use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote};
use syn::{Data, DeriveInput, Error, Expr, Fields, Ident, LitStr, Type};

/// `"1.2"` as `(1, 2)`: RPC API versions are MAJOR.MINOR.
fn rpc_version(lit: &LitStr) -> syn::Result<TokenStream2> {
    let text = lit.value();
    let parts: Result<Vec<u32>, _> = text.split('.').map(str::parse::<u32>).collect();
    match parts.as_deref() {
        Ok([a, b]) => Ok(quote!(::verso_rpc::method::__private::Version::new(#a, #b))),
        _ => Err(Error::new(
            lit.span(),
            format!("RPC version \"{text}\" must be MAJOR.MINOR"),
        )),
    }
}

/// `ReportData` -> `report_data`.
fn snake_case(ident: &Ident) -> String {
    let mut out = String::new();
    for (i, c) in ident.to_string().chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

struct Arg {
    ident: Ident,
    ty: Type,
    name: String,
    since: Option<TokenStream2>,
    default: Option<Expr>,
    arg_type: Option<Ident>,
    nullable: bool,
}

pub(crate) fn expand_rpc_method(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let ident = &input.ident;
    let mut name = snake_case(ident);
    let mut since = None;
    let mut reply: Type = syn::parse_quote!(());
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("rpc")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("name") {
                name = meta.value()?.parse::<LitStr>()?.value();
            } else if meta.path.is_ident("since") {
                since = Some(rpc_version(&meta.value()?.parse::<LitStr>()?)?);
            } else if meta.path.is_ident("reply") {
                reply = meta.value()?.parse::<Type>()?;
            } else {
                return Err(meta.error("expected `name`, `since` or `reply`"));
            }
            Ok(())
        })?;
    }
    let since = since.ok_or_else(|| {
        Error::new_spanned(
            ident,
            "an RPC method needs #[rpc(since = \"X.Y\")]: the API version that introduced it",
        )
    })?;
    if !input.generics.params.is_empty() {
        return Err(Error::new_spanned(
            &input.generics,
            "an RPC method's argument struct cannot be generic",
        ));
    }
    let fields = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(f) => f.named.iter().collect::<Vec<_>>(),
            Fields::Unit => Vec::new(),
            Fields::Unnamed(_) => {
                return Err(Error::new_spanned(
                    ident,
                    "RPC arguments are named: use a struct with named fields",
                ))
            }
        },
        _ => {
            return Err(Error::new_spanned(
                ident,
                "#[derive(RpcMethod)] is for structs of arguments",
            ))
        }
    };
    let mut args: Vec<Arg> = Vec::new();
    for f in fields {
        let Some(field_ident) = f.ident.clone() else {
            continue;
        };
        let mut arg = Arg {
            name: field_ident.to_string().trim_start_matches("r#").to_owned(),
            ident: field_ident,
            ty: f.ty.clone(),
            since: None,
            default: None,
            arg_type: None,
            nullable: false,
        };
        for attr in f.attrs.iter().filter(|a| a.path().is_ident("rpc")) {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("since") {
                    arg.since = Some(rpc_version(&meta.value()?.parse::<LitStr>()?)?);
                } else if meta.path.is_ident("default") {
                    arg.default = Some(meta.value()?.parse::<Expr>()?);
                } else if meta.path.is_ident("arg_type") {
                    arg.arg_type = Some(meta.value()?.parse::<Ident>()?);
                } else if meta.path.is_ident("rename") {
                    arg.name = meta.value()?.parse::<LitStr>()?.value();
                } else if meta.path.is_ident("nullable") {
                    arg.nullable = true;
                } else {
                    return Err(meta
                        .error("expected `since`, `default`, `arg_type`, `rename` or `nullable`"));
                }
                Ok(())
            })?;
        }
        if let Some(first) = args.iter().find(|a| a.name == arg.name) {
            return Err(Error::new_spanned(
                &arg.ident,
                format!(
                    "argument name \"{}\" is already the name of field `{}` (check `rename`)",
                    arg.name, first.ident
                ),
            ));
        }
        args.push(arg);
    }

    let p = quote!(::verso_rpc::method::__private);
    let tag = |ty: &Type| quote!((&&#p::Tag::<#ty>::new()));
    let specs = args.iter().map(|a| {
        let Arg {
            name,
            ty,
            since,
            default,
            arg_type,
            nullable,
            ..
        } = a;
        let t = tag(ty);
        let since = match since {
            Some(s) => quote!(::core::option::Option::Some(#s)),
            None => quote!(::core::option::Option::None),
        };
        let arg_type = match arg_type {
            Some(i) => quote!(::core::option::Option::Some(::verso_rpc::ArgType::#i)),
            None => quote!(::core::option::Option::None),
        };
        let default = match default {
            Some(Expr::Path(x)) if x.path.is_ident("None") => {
                quote!(::core::option::Option::Some({
                    let d: #ty = ::core::option::Option::None;
                    #t.encode(&d, &::verso_rpc::method::Encoder::new())
                }))
            }
            Some(d) => quote!(::core::option::Option::Some({
                let d: #ty = ::core::convert::Into::into(#d);
                #t.encode(&d, &::verso_rpc::method::Encoder::new())
            })),
            None => quote!(::core::option::Option::None),
        };
        quote! {
            spec = spec.arg(#p::arg_spec(#name, #t.arg_type(), #arg_type, #nullable, #since, #default));
        }
    });
    let encodes = args.iter().map(|a| {
        let (ident, name, t) = (&a.ident, &a.name, tag(&a.ty));
        quote! {
            args.insert(
                ::std::string::String::from(#name),
                #t.encode(&self.#ident, enc).map_err(|e| #p::not_encoded(#name, e))?,
            );
        }
    });
    let decodes = args.iter().map(|a| {
        let (ident, name, t) = (&a.ident, &a.name, tag(&a.ty));
        quote! {
            #ident: #t
                .decode(args.remove(#name).unwrap_or(#p::Value::Null))
                .map_err(|e| #p::bad_argument(#name, e))?,
        }
    });
    let arg_manifests = args.iter().map(|a| {
        let t = tag(&a.ty);
        quote!(#t.manifest())
    });
    let reply_tag = tag(&reply);
    let spec_static = format_ident!("__VERSO_RPC_SPEC");
    Ok(quote! {
        impl ::verso_rpc::RpcMethod for #ident {
            const NAME: &'static str = #name;
            const SINCE: #p::Version = #since;
            type Reply = #reply;

            fn spec() -> &'static ::verso_rpc::MethodSpec {
                static #spec_static: ::std::sync::OnceLock<::verso_rpc::MethodSpec> =
                    ::std::sync::OnceLock::new();
                #spec_static.get_or_init(|| {
                    #[allow(unused_imports)]
                    use #p::{ViaField as _, ViaSerde as _};
                    #[allow(unused_mut)]
                    let mut spec = ::verso_rpc::MethodSpec::new(#name, #since);
                    #(#specs)*
                    spec
                })
            }

            fn encode_args(
                &self,
                enc: &::verso_rpc::method::Encoder<'_>,
            ) -> ::core::result::Result<#p::Map<::std::string::String, #p::Value>, ::verso_rpc::RpcError> {
                #[allow(unused_imports)]
                use #p::{ViaField as _, ViaSerde as _};
                let _ = enc;
                #[allow(unused_mut)]
                let mut args = #p::Map::new();
                #(#encodes)*
                ::core::result::Result::Ok(args)
            }

            #[allow(clippy::result_large_err)]
            fn decode_args(
                mut args: #p::Map<::std::string::String, #p::Value>,
            ) -> ::core::result::Result<Self, ::verso_rpc::RemoteError> {
                #[allow(unused_imports)]
                use #p::{ViaField as _, ViaSerde as _};
                let _ = &mut args;
                ::core::result::Result::Ok(#ident { #(#decodes)* })
            }

            fn encode_reply(
                reply: &#reply,
                enc: &::verso_rpc::method::Encoder<'_>,
            ) -> ::core::result::Result<#p::Value, ::verso_rpc::RpcError> {
                #[allow(unused_imports)]
                use #p::{ViaField as _, ViaSerde as _};
                #reply_tag.encode(reply, enc).map_err(|e| #p::not_encoded("reply", e))
            }

            fn decode_reply(
                value: #p::Value,
            ) -> ::core::result::Result<#reply, ::verso_rpc::RpcError> {
                #[allow(unused_imports)]
                use #p::{ViaField as _, ViaSerde as _};
                #reply_tag.decode(value).map_err(|e| #p::not_encoded("reply", e))
            }

            fn args_manifest() -> ::core::option::Option<&'static #p::VersionManifest> {
                static MANIFEST: ::std::sync::OnceLock<::core::option::Option<#p::VersionManifest>> =
                    ::std::sync::OnceLock::new();
                MANIFEST
                    .get_or_init(|| {
                        #[allow(unused_imports)]
                        use #p::{ViaField as _, ViaSerde as _};
                        #p::merge_manifests([#(#arg_manifests),*])
                    })
                    .as_ref()
            }

            fn reply_manifest() -> ::core::option::Option<&'static #p::VersionManifest> {
                static MANIFEST: ::std::sync::OnceLock<::core::option::Option<#p::VersionManifest>> =
                    ::std::sync::OnceLock::new();
                MANIFEST
                    .get_or_init(|| {
                        #[allow(unused_imports)]
                        use #p::{ViaField as _, ViaSerde as _};
                        #reply_tag.manifest()
                    })
                    .as_ref()
            }
        }
    })
}
