//! Derive macros for verso: `#[derive(VersionedObject)]`, `#[derive(VersionedEnum)]`,
//! `#[derive(ObjectFamily)]`, `#[derive(RpcMethod)]` and `#[verso::remotable]`.
//!
//! The macros only describe the type (schema, field access); every behaviour lives in the
//! `verso` crate, as serde's derive leaves the work to serde.
//!
//! (Long on purpose: the derives share their attribute parsing and the generated code
//! is read best beside the attributes that shape it.)

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::quote;
use syn::{
    ext::IdentExt, parse_macro_input, spanned::Spanned, Data, DeriveInput, Error, Expr, Fields,
    GenericArgument, Ident, LitStr, PathArguments, Type,
};

mod rpc;

/// Derives `verso_rpc::RpcMethod` for the argument struct of an RPC method (use it as
/// `verso_rpc::RpcMethod`).
///
/// Struct attributes (`#[rpc(...)]`): `since = "X.Y"` (required: the API version that
/// introduced the method), `name = "..."` (the wire name; default: the struct name in
/// snake case), `reply = Type` (default `()`).
///
/// Field attributes: `since = "X.Y"` (the version that added the argument),
/// `default = expr` (makes it optional; required without it), `nullable` (takes `null`;
/// `Option` fields of verso field types are nullable already), `arg_type = Dict` (the
/// declared `ArgType` when the field type does not say it), `rename = "..."`.
#[proc_macro_derive(RpcMethod, attributes(rpc))]
pub fn derive_rpc_method(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    rpc::expand_rpc_method(&input)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

/// Derives `verso::VersionedObject` for a struct of `Field<T>` fields and one
/// `ObjectMeta` field.
///
/// Struct attributes (`#[verso(...)]`): `namespace = "..."` (the project namespace),
/// `serial_namespace = "..."` (OVO's `OBJ_SERIAL_NAMESPACE`, the prefix of the
/// primitive's keys; default `versioned_object`), or instead of both `family = Path`
/// (a type with `#[derive(ObjectFamily)]` that declares them once for many classes);
/// `version = "X.Y"` (required), `name = "..."` (default: the struct name), `list` (a list object: one
/// field `objects: Field<Vec<Member>>`), `child_versions = [("1.0", "1.0"), ...]` (lists),
/// `make_compatible = path::to::fn` (custom backport hook), `remotable` (the type has a
/// `#[verso::remotable]` impl block), `test_only` (kept out of fingerprint lock files).
///
/// Field attributes: `since = "X.Y"` (the version that added the field), `default = expr`
/// (a value convertible into the field type), `rename = "..."` (the wire name, when it
/// is not the Rust name; `r#type` is `type` without it),
/// `relationships = [("1.1", "1.1"), ...]`
/// (for object fields: which child version goes with which parent version), and, for an
/// enum field whose Python declaration prints otherwise in OVO's fingerprint, one of
/// `ovo_enum_class = "Name"`, `ovo_auto_typed`, `ovo_values_as_text` (`verso::OvoRepr`).
#[proc_macro_derive(VersionedObject, attributes(verso))]
pub fn derive_versioned_object(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand_object(&input)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

/// Derives `verso::ObjectFamily` for a marker type: the project namespace and serial
/// namespace that every class naming it in `#[verso(family = Type)]` shares, as the
/// classes of one oslo.versionedobjects base class share `OBJ_PROJECT_NAMESPACE` and
/// `OBJ_SERIAL_NAMESPACE`.
///
/// Attributes (`#[verso(...)]`): `namespace = "..."` (required), `serial_namespace =
/// "..."` (default `versioned_object`).
#[proc_macro_derive(ObjectFamily, attributes(verso))]
pub fn derive_object_family(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand_family(&input)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

fn expand_family(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let ident = &input.ident;
    if !input.generics.params.is_empty() {
        return Err(Error::new(
            input.generics.span(),
            "an object family cannot be generic",
        ));
    }
    let mut namespace: Option<LitStr> = None;
    let mut serial: Option<LitStr> = None;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("verso")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("namespace") {
                namespace = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("serial_namespace") {
                serial = Some(meta.value()?.parse()?);
            } else {
                return Err(
                    meta.error("unknown verso attribute; expected namespace or serial_namespace")
                );
            }
            Ok(())
        })?;
    }
    let namespace = namespace
        .ok_or_else(|| Error::new(Span::call_site(), "missing #[verso(namespace = \"...\")]"))?;
    let keys = primitive_keys(serial.as_ref())?;
    Ok(quote! {
        impl ::verso::ObjectFamily for #ident {
            const NAMESPACE: &'static str = #namespace;
            const PRIMITIVE_KEYS: ::verso::PrimitiveKeys = #keys;
        }
    })
}

/// The `PrimitiveKeys` of a serial namespace, every key written out here so the codec
/// never builds one; the default's without one.
fn primitive_keys(serial: Option<&LitStr>) -> syn::Result<TokenStream2> {
    let Some(lit) = serial else {
        return Ok(quote!(::verso::PrimitiveKeys::VERSIONED_OBJECT));
    };
    let text = lit.value();
    // The byte path writes the keys raw, so they must need no JSON escaping.
    if text.is_empty()
        || !text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
    {
        return Err(Error::new(
            lit.span(),
            format!(
                "serial namespace \"{text}\" must be non-empty ASCII letters, digits, '_', '-' or '.'"
            ),
        ));
    }
    let [a, b, c, d, e] =
        ["name", "namespace", "version", "data", "changes"].map(|part| format!("{text}.{part}"));
    Ok(quote!(::verso::PrimitiveKeys::__new(#text, [#a, #b, #c, #d, #e])))
}

/// Derives `verso::VersionedEnum` (and `FieldValue`, `Display`) for a fieldless enum whose
/// variants are an OVO `Enum` field's valid values. `#[verso(value = "...")]` on a
/// variant sets its wire text (default: the variant name).
#[proc_macro_derive(VersionedEnum, attributes(verso))]
pub fn derive_versioned_enum(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand_enum(&input)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

fn parse_version(lit: &LitStr) -> syn::Result<TokenStream2> {
    let text = lit.value();
    let parts: Result<Vec<u32>, _> = text.split('.').map(str::parse::<u32>).collect();
    match parts.as_deref() {
        Ok([a, b]) => Ok(quote!(::verso::Version::new(#a, #b))),
        Ok([a, b, c]) => Ok(quote!(::verso::Version::with_patch(#a, #b, #c))),
        _ => Err(Error::new(
            lit.span(),
            format!("version \"{text}\" must be MAJOR.MINOR or MAJOR.MINOR.PATCH"),
        )),
    }
}

/// `[("1.0", "1.0"), ("1.1", "1.2")]` -> `vec![(Version, Version), ...]`.
fn parse_pairs(expr: &Expr) -> syn::Result<TokenStream2> {
    let Expr::Array(arr) = expr else {
        return Err(Error::new(
            expr.span(),
            "expected [(\"parent\", \"child\"), ...]",
        ));
    };
    let mut pairs = Vec::new();
    for elem in &arr.elems {
        let Expr::Tuple(t) = elem else {
            return Err(Error::new(elem.span(), "expected (\"parent\", \"child\")"));
        };
        let lits: Vec<&LitStr> = t
            .elems
            .iter()
            .filter_map(|e| match e {
                Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s),
                _ => None,
            })
            .collect();
        let [a, b] = lits.as_slice() else {
            return Err(Error::new(t.span(), "expected two version strings"));
        };
        let (a, b) = (parse_version(a)?, parse_version(b)?);
        pairs.push(quote!((#a, #b)));
    }
    Ok(quote!(::std::vec![#(#pairs),*]))
}

#[derive(Default)]
struct ObjectAttrs {
    namespace: Option<LitStr>,
    serial_namespace: Option<LitStr>,
    family: Option<syn::Path>,
    name: Option<LitStr>,
    version: Option<LitStr>,
    list: bool,
    child_versions: Option<TokenStream2>,
    make_compatible: Option<syn::Path>,
    remotable: bool,
    test_only: bool,
}

struct FieldInfo {
    ident: Ident,
    wire_name: String,
    inner: Type,
    since: Option<TokenStream2>,
    default: Option<Expr>,
    relationships: Option<TokenStream2>,
    ovo_repr: Option<TokenStream2>,
}

/// The `T` of `Wrapper<T>` when the type's last path segment is `wrapper`.
fn generic_arg<'a>(ty: &'a Type, wrapper: &str) -> Option<&'a Type> {
    let Type::Path(p) = ty else { return None };
    let seg = p.path.segments.last()?;
    if seg.ident != wrapper {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &seg.arguments else {
        return None;
    };
    match args.args.first()? {
        GenericArgument::Type(t) => Some(t),
        _ => None,
    }
}

/// Records a field's `OvoRepr` attribute; the three are alternatives.
fn set_ovo_repr(
    meta: &syn::meta::ParseNestedMeta<'_>,
    slot: &mut Option<TokenStream2>,
    repr: TokenStream2,
) -> syn::Result<()> {
    if slot.replace(repr).is_some() {
        return Err(meta.error(
            "ovo_enum_class, ovo_auto_typed and ovo_values_as_text are alternatives; give one",
        ));
    }
    Ok(())
}

fn is_meta(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "ObjectMeta"))
}

fn expand_object(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let ident = &input.ident;
    if !input.generics.params.is_empty() {
        return Err(Error::new(
            input.generics.span(),
            "versioned objects cannot be generic",
        ));
    }
    let mut attrs = ObjectAttrs::default();
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("verso")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("namespace") {
                attrs.namespace = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("serial_namespace") {
                attrs.serial_namespace = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("family") {
                attrs.family = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("name") {
                attrs.name = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("version") {
                attrs.version = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("list") {
                attrs.list = true;
            } else if meta.path.is_ident("child_versions") {
                attrs.child_versions = Some(parse_pairs(&meta.value()?.parse()?)?);
            } else if meta.path.is_ident("make_compatible") {
                attrs.make_compatible = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("remotable") {
                attrs.remotable = true;
            } else if meta.path.is_ident("test_only") {
                attrs.test_only = true;
            } else {
                return Err(meta.error("unknown verso attribute; expected namespace, serial_namespace, family, name, version, list, child_versions, make_compatible, remotable or test_only"));
            }
            Ok(())
        })?;
    }
    let (namespace, keys) = match (attrs.family, attrs.namespace, attrs.serial_namespace) {
        (Some(family), None, None) => (
            quote!(<#family as ::verso::ObjectFamily>::NAMESPACE),
            quote!(<#family as ::verso::ObjectFamily>::PRIMITIVE_KEYS),
        ),
        (Some(family), _, _) => {
            return Err(Error::new(
                family.span(),
                "a class of a family takes its namespace and serial_namespace from the family: remove them here",
            ))
        }
        (None, Some(namespace), serial) => (quote!(#namespace), primitive_keys(serial.as_ref())?),
        (None, None, _) => {
            return Err(Error::new(
                Span::call_site(),
                "missing #[verso(namespace = \"...\")] (or family = Type)",
            ))
        }
    };
    let version_lit = attrs
        .version
        .ok_or_else(|| Error::new(Span::call_site(), "missing #[verso(version = \"X.Y\")]"))?;
    let version = parse_version(&version_lit)?;
    let name = attrs
        .name
        .unwrap_or_else(|| LitStr::new(&ident.to_string(), ident.span()));

    let Data::Struct(data) = &input.data else {
        return Err(Error::new(
            input.ident.span(),
            "VersionedObject can only be derived for structs",
        ));
    };
    let Fields::Named(named) = &data.fields else {
        return Err(Error::new(
            data.fields.span(),
            "VersionedObject needs named fields",
        ));
    };
    let mut meta_field = None;
    let mut fields: Vec<FieldInfo> = Vec::new();
    for f in &named.named {
        let Some(fid) = f.ident.clone() else { continue };
        if is_meta(&f.ty) {
            meta_field = Some(fid);
            continue;
        }
        let inner = generic_arg(&f.ty, "Field")
            .ok_or_else(|| Error::new(f.ty.span(), "every field of a versioned object is a verso::Field<T> (or the one ObjectMeta)"))?
            .clone();
        let mut info = FieldInfo {
            wire_name: fid.unraw().to_string(),
            ident: fid,
            inner,
            since: None,
            default: None,
            relationships: None,
            ovo_repr: None,
        };
        for attr in f.attrs.iter().filter(|a| a.path().is_ident("verso")) {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("since") {
                    info.since = Some(parse_version(&meta.value()?.parse()?)?);
                } else if meta.path.is_ident("default") {
                    info.default = Some(meta.value()?.parse()?);
                } else if meta.path.is_ident("rename") {
                    info.wire_name = meta.value()?.parse::<LitStr>()?.value();
                } else if meta.path.is_ident("relationships") {
                    info.relationships = Some(parse_pairs(&meta.value()?.parse()?)?);
                } else if meta.path.is_ident("ovo_enum_class") {
                    let class = meta.value()?.parse::<LitStr>()?;
                    set_ovo_repr(&meta, &mut info.ovo_repr, quote!(::verso::OvoRepr::EnumClass(#class)))?;
                } else if meta.path.is_ident("ovo_auto_typed") {
                    set_ovo_repr(&meta, &mut info.ovo_repr, quote!(::verso::OvoRepr::AutoTyped))?;
                } else if meta.path.is_ident("ovo_values_as_text") {
                    set_ovo_repr(&meta, &mut info.ovo_repr, quote!(::verso::OvoRepr::ValuesAsText))?;
                } else {
                    return Err(meta.error("unknown verso field attribute; expected since, default, rename, relationships, ovo_enum_class, ovo_auto_typed or ovo_values_as_text"));
                }
                Ok(())
            })?;
        }
        // Two fields under one wire name would decode into the first and write the key
        // twice.
        if let Some(first) = fields.iter().find(|f| f.wire_name == info.wire_name) {
            return Err(Error::new(
                info.ident.span(),
                format!(
                    "field name \"{}\" is already the name of field `{}` (check `rename`)",
                    info.wire_name, first.ident
                ),
            ));
        }
        fields.push(info);
    }
    let meta_field = meta_field.ok_or_else(|| {
        Error::new(
            input.ident.span(),
            "a versioned object needs one field of type verso::ObjectMeta",
        )
    })?;

    let field_schemas = fields.iter().map(|f| {
        let fname = &f.wire_name;
        let ty = &f.inner;
        let since = f.since.as_ref().map_or(quote!(::core::option::Option::None), |v| quote!(::core::option::Option::Some(#v)));
        let default = f.default.as_ref().map_or(quote!(::core::option::Option::None), |e| {
            quote!(::core::option::Option::Some(::verso::__private::default_primitive::<#ty>(::core::convert::Into::<#ty>::into(#e))))
        });
        let rel = f.relationships.clone().unwrap_or_else(|| quote!(::std::vec::Vec::new()));
        let ovo_repr = f.ovo_repr.clone().unwrap_or_else(|| quote!(::verso::OvoRepr::Standard));
        quote! {
            ::verso::FieldSchema {
                name: #fname,
                ty: <#ty as ::verso::FieldValue>::field_type(),
                nullable: <#ty as ::verso::FieldValue>::nullable(),
                default: #default,
                since: #since,
                relationships: #rel,
                child: <#ty as ::verso::FieldValue>::child_schema(),
                ovo_repr: #ovo_repr,
            }
        }
    });
    let child_versions = attrs
        .child_versions
        .unwrap_or_else(|| quote!(::std::vec::Vec::new()));
    let is_list = attrs.list;
    let test_only = attrs.test_only;
    let custom = attrs.make_compatible.is_some();
    let methods = if attrs.remotable {
        quote!(<#ident as ::verso::indirection::Remotable>::remotable_methods())
    } else {
        quote!(::std::vec::Vec::new())
    };

    let idents: Vec<&Ident> = fields.iter().map(|f| &f.ident).collect();
    let indices: Vec<usize> = (0..fields.len()).collect();
    let wire_names: Vec<&String> = fields.iter().map(|f| &f.wire_name).collect();
    // `"name":` as a byte literal when the name needs no JSON escaping (always, for a
    // Rust identifier), else escaped at run time.
    let write_keys = wire_names.iter().map(|name| {
        if name.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
            let key = syn::LitByteStr::new(format!("\"{name}\":").as_bytes(), Span::call_site());
            quote!(::verso::__private::Sink::field_key(out, #name, #key);)
        } else {
            quote!(::verso::__private::Sink::key(out, #name);)
        }
    });
    let blank_fields = fields.iter().map(|f| {
        let id = &f.ident;
        if is_list && id == "objects" {
            // OVO's ObjectListBase starts with an empty, unchanged member list.
            quote!(#id: { let mut f = ::verso::Field::new(::std::vec::Vec::new()); f.set_changed(false); f })
        } else {
            quote!(#id: ::verso::Field::unset())
        }
    });
    let make_compatible_body = match attrs.make_compatible {
        Some(path) => quote!(#path(self, data, target, manifest)),
        None => quote!(::verso::__private::default_make_compatible(
            self, data, target, manifest
        )),
    };
    let make_compatible = quote! {
        fn make_compatible(
            &self,
            data: &mut ::verso::PrimitiveData,
            target: &::verso::Version,
            manifest: ::core::option::Option<&::verso::VersionManifest>,
        ) -> ::verso::Result<()> {
            #make_compatible_body
        }
        fn to_primitive(&self, target: ::verso::Target<'_>) -> ::verso::Result<::verso::__private::Value> {
            ::verso::__private::to_primitive(self, target)
        }
        fn to_primitive_bytes(&self, target: ::verso::Target<'_>) -> ::verso::Result<::std::vec::Vec<u8>> {
            ::verso::__private::to_primitive_bytes(self, target)
        }
        fn from_primitive_limited(
            primitive: &::verso::__private::Value,
            limits: &::verso::DecodeLimits,
        ) -> ::verso::Result<Self> {
            ::verso::__private::from_primitive_limited(primitive, limits)
        }
        fn from_primitive_slice_limited(
            bytes: &[u8],
            limits: &::verso::DecodeLimits,
        ) -> ::verso::Result<Self> {
            ::verso::__private::from_primitive_slice_limited(bytes, limits)
        }
    };
    let list_impls = if is_list {
        let objects = fields
            .iter()
            .find(|f| f.ident == "objects")
            .ok_or_else(|| {
                Error::new(
                    input.ident.span(),
                    "a list object needs a field `objects: Field<Vec<Member>>`",
                )
            })?;
        let item = generic_arg(&objects.inner, "Vec").ok_or_else(|| {
            Error::new(objects.inner.span(), "`objects` must be Field<Vec<Member>>")
        })?;
        quote! {
            impl ::verso::ObjectList for #ident {
                type Item = #item;
                fn objects(&self) -> &[#item] {
                    self.objects.get().map_or(&[], ::std::vec::Vec::as_slice)
                }
                fn objects_mut(&mut self) -> &mut ::std::vec::Vec<#item> {
                    if !self.objects.is_set() {
                        self.objects.set(::std::vec::Vec::new());
                    }
                    match self.objects.get_mut() {
                        ::core::option::Option::Some(v) => v,
                        ::core::option::Option::None => unreachable!("set just above"),
                    }
                }
                fn from_objects(objects: ::std::vec::Vec<#item>) -> Self {
                    let mut list = <Self as ::verso::VersionedObject>::blank();
                    list.objects.set(objects);
                    list
                }
            }
            impl<'a> ::core::iter::IntoIterator for &'a #ident {
                type Item = &'a #item;
                type IntoIter = ::std::slice::Iter<'a, #item>;
                fn into_iter(self) -> Self::IntoIter {
                    ::verso::ObjectList::iter(self)
                }
            }
            impl ::core::ops::Index<usize> for #ident {
                type Output = #item;
                fn index(&self, i: usize) -> &#item {
                    &::verso::ObjectList::objects(self)[i]
                }
            }
        }
    } else {
        quote!()
    };
    let n = fields.len();

    Ok(quote! {
        impl ::verso::VersionedObject for #ident {
            const NAME: &'static str = #name;
            const NAMESPACE: &'static str = #namespace;
            const VERSION: ::verso::Version = #version;
            const PRIMITIVE_KEYS: ::verso::PrimitiveKeys = #keys;

            fn schema() -> &'static ::verso::ObjectSchema {
                static SCHEMA: ::std::sync::OnceLock<::verso::ObjectSchema> = ::std::sync::OnceLock::new();
                SCHEMA.get_or_init(|| {
                    let mut methods: ::std::vec::Vec<::verso::MethodSchema> = #methods;
                    methods.sort_by(|a, b| a.name.cmp(b.name));
                    ::verso::ObjectSchema {
                        name: #name,
                        namespace: #namespace,
                        primitive_keys: #keys,
                        version: #version,
                        is_list: #is_list,
                        fields: ::std::vec![#(#field_schemas),*],
                        child_versions: #child_versions,
                        methods,
                        test_only: #test_only,
                        custom_make_compatible: #custom,
                    }
                })
            }
            fn blank() -> Self {
                #ident { #(#blank_fields,)* #meta_field: ::core::default::Default::default() }
            }
            fn meta(&self) -> &::verso::ObjectMeta {
                &self.#meta_field
            }
            fn meta_mut(&mut self) -> &mut ::verso::ObjectMeta {
                &mut self.#meta_field
            }
            fn field(&self, index: usize) -> &dyn ::verso::DynField {
                match index {
                    #(#indices => &self.#idents,)*
                    _ => panic!("{} has {} fields, not {}", #name, #n, index),
                }
            }
            fn field_mut(&mut self, index: usize) -> &mut dyn ::verso::DynField {
                match index {
                    #(#indices => &mut self.#idents,)*
                    _ => panic!("{} has {} fields, not {}", #name, #n, index),
                }
            }
            fn __encode_fields<S: ::verso::__private::Sink>(&self, out: &mut S) {
                let mut first = true;
                #(
                    if let ::core::option::Option::Some(v) = self.#idents.get() {
                        if !first {
                            ::verso::__private::Sink::next(out);
                        }
                        first = false;
                        #write_keys
                        ::verso::FieldValue::encode(v, out);
                    }
                )*
                let _ = first;
            }
            fn __field_index(name: &str) -> ::core::option::Option<usize> {
                match name {
                    #(#wire_names => ::core::option::Option::Some(#indices),)*
                    _ => ::core::option::Option::None,
                }
            }
            fn __read_field<'de, A: ::verso::__private::MapAccess<'de>>(
                &mut self,
                index: usize,
                map: &mut A,
                cx: ::verso::field::DecodeContext<'_>,
            ) -> ::core::result::Result<::verso::Result<()>, A::Error> {
                let fields = &<Self as ::verso::VersionedObject>::schema().fields;
                match index {
                    #(#indices => ::verso::__private::read_field(
                        &mut self.#idents,
                        fields[#indices].default.as_ref(),
                        (#name, fields[#indices].name),
                        map,
                        cx,
                    ),)*
                    _ => ::core::result::Result::Ok(::core::result::Result::Err(
                        ::verso::__private::no_field_at(#name, index),
                    )),
                }
            }
            #make_compatible
        }

        impl ::verso::FieldValue for #ident {
            fn field_type() -> ::verso::FieldType {
                ::verso::FieldType::Object(#name)
            }
            fn child_schema() -> ::core::option::Option<fn() -> &'static ::verso::ObjectSchema> {
                ::core::option::Option::Some(<Self as ::verso::VersionedObject>::schema)
            }
            fn encode<S: ::verso::__private::Sink>(&self, out: &mut S) {
                ::verso::__private::encode_object(self, out)
            }
            fn from_primitive_in(
                value: &::verso::__private::Value,
                cx: ::verso::field::DecodeContext<'_>,
            ) -> ::core::result::Result<Self, ::verso::FieldError> {
                ::verso::__private::decode_contained::<Self>(value, cx)
            }
            fn from_json_map<'de, A: ::verso::__private::MapAccess<'de>>(
                map: A,
                cx: ::verso::field::DecodeContext<'_>,
            ) -> ::core::result::Result<::core::result::Result<Self, ::verso::FieldError>, A::Error> {
                ::verso::__private::decode_map::<Self, A>(map, cx)
            }
            fn __push_json_map<'de, A: ::verso::__private::MapAccess<'de>>(
                into: &mut ::std::vec::Vec<Self>,
                map: A,
                cx: ::verso::field::DecodeContext<'_>,
            ) -> ::core::result::Result<::core::result::Result<(), ::verso::FieldError>, A::Error> {
                ::verso::__private::push_decoded_map::<Self, A>(into, map, cx)
            }
            fn describe(&self) -> ::verso::__private::Value {
                ::verso::VersionedObject::describe(self)
            }
            fn write_backport(
                &self,
                out: &mut ::std::vec::Vec<u8>,
                to: &::verso::Version,
                manifest: ::core::option::Option<&::verso::VersionManifest>,
            ) -> ::verso::Result<()> {
                ::verso::__private::write_backported_child(self, out, to, manifest)
            }
            fn has_changes(&self) -> bool {
                ::verso::__private::has_changes(self)
            }
            fn reset_changes_recursive(&mut self) {
                ::verso::VersionedObject::reset_changes_of(self, &[], true)
            }
            fn backport(
                &self,
                primitive: &mut ::verso::__private::Value,
                to: &::verso::Version,
                manifest: ::core::option::Option<&::verso::VersionManifest>,
            ) -> ::verso::Result<()> {
                ::verso::__private::backport_object(self, primitive, to, manifest)
            }
            fn attach_context(&mut self, ctx: &::verso::RequestContext) {
                ::verso::__private::attach_context(self, ctx)
            }
        }

        impl ::verso::indirection::RemoteValue for #ident {
            fn to_remote(&self) -> ::verso::__private::Value {
                ::verso::__private::encode_own(self)
            }
            fn from_remote(value: &::verso::__private::Value) -> ::core::result::Result<Self, ::verso::FieldError> {
                ::verso::__private::decode_contained::<Self>(value, ::verso::field::DecodeContext::NONE)
            }
            fn attach_context(&mut self, ctx: &::verso::RequestContext) {
                ::verso::__private::attach_context(self, ctx)
            }
            fn into_output(self) -> ::verso::indirection::MethodOutput {
                ::verso::__private::object_into_output(self)
            }
            fn manifest() -> ::core::option::Option<::verso::VersionManifest> {
                ::core::option::Option::Some(<Self as ::verso::VersionedObject>::manifest())
            }
        }

        #list_impls
    })
}

fn expand_enum(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let ident = &input.ident;
    let Data::Enum(data) = &input.data else {
        return Err(Error::new(
            input.ident.span(),
            "VersionedEnum can only be derived for enums",
        ));
    };
    let mut variants = Vec::new();
    let mut values = Vec::new();
    for v in &data.variants {
        if !matches!(v.fields, Fields::Unit) {
            return Err(Error::new(v.span(), "VersionedEnum variants carry no data"));
        }
        let mut value = LitStr::new(&v.ident.to_string(), v.ident.span());
        for attr in v.attrs.iter().filter(|a| a.path().is_ident("verso")) {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("value") {
                    value = meta.value()?.parse()?;
                    Ok(())
                } else {
                    Err(meta.error("unknown verso variant attribute; expected value = \"...\""))
                }
            })?;
        }
        if let Some(i) = values
            .iter()
            .position(|w: &LitStr| w.value() == value.value())
        {
            return Err(Error::new(
                value.span(),
                format!(
                    "value \"{}\" is already the value of variant `{}`",
                    value.value(),
                    variants[i]
                ),
            ));
        }
        variants.push(&v.ident);
        values.push(value);
    }
    Ok(quote! {
        impl ::verso::VersionedEnum for #ident {
            const VALUES: &'static [&'static str] = &[#(#values),*];
            fn as_str(&self) -> &'static str {
                match self { #(#ident::#variants => #values,)* }
            }
            fn from_str(s: &str) -> ::core::option::Option<Self> {
                match s { #(#values => ::core::option::Option::Some(#ident::#variants),)* _ => ::core::option::Option::None }
            }
        }
        impl ::verso::FieldValue for #ident {
            fn field_type() -> ::verso::FieldType {
                ::verso::FieldType::Enum(<Self as ::verso::VersionedEnum>::VALUES)
            }
            fn encode<S: ::verso::__private::Sink>(&self, out: &mut S) {
                ::verso::__private::Sink::str(out, ::verso::VersionedEnum::as_str(self))
            }
            fn from_primitive_in(
                value: &::verso::__private::Value,
                _: ::verso::field::DecodeContext<'_>,
            ) -> ::core::result::Result<Self, ::verso::FieldError> {
                ::verso::__private::enum_from_primitive(value)
            }
            fn from_json_str(s: &str) -> ::core::result::Result<Self, ::verso::FieldError> {
                ::verso::__private::enum_from_str(s)
            }
        }
        impl ::core::fmt::Display for #ident {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(::verso::VersionedEnum::as_str(self))
            }
        }

        impl ::verso::indirection::RemoteValue for #ident {
            fn to_remote(&self) -> ::verso::__private::Value {
                ::verso::FieldValue::to_primitive(self)
            }
            fn from_remote(value: &::verso::__private::Value) -> ::core::result::Result<Self, ::verso::FieldError> {
                ::verso::__private::enum_from_primitive(value)
            }
            fn attach_context(&mut self, _ctx: &::verso::RequestContext) {}
            fn into_output(self) -> ::verso::indirection::MethodOutput {
                ::verso::__private::enum_into_output(self)
            }
            fn manifest() -> ::core::option::Option<::verso::VersionManifest> {
                ::core::option::Option::None
            }
        }
    })
}

/// Makes the `#[remotable]` methods of an impl block remotable.
///
/// A class method is `async fn name(ctx: &RequestContext, args...) -> Result<R, E>`; an
/// instance method is `async fn name(&mut self, args...) -> Result<R, E>`, where
/// arguments and `R` are `verso::indirection::RemoteValue`s (field values, objects, `()`) and
/// `E` converts to and from `verso::CallError`. Each becomes a wrapper that delegates to
/// the context's indirection API when one is configured for the object's namespace and
/// runs the body locally otherwise; the block also implements `verso::Remotable` so a
/// conductor's registry can dispatch calls by name. Mark the struct
/// `#[verso(remotable)]` so its schema lists the methods.
#[proc_macro_attribute]
pub fn remotable(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return Error::new(Span::call_site(), "#[verso::remotable] takes no arguments")
            .into_compile_error()
            .into();
    }
    let block = parse_macro_input!(item as syn::ItemImpl);
    expand_remotable(block)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

struct RemoteMethod {
    name: Ident,
    instance: bool,
    ctx: Option<syn::Pat>,
    args: Vec<(Ident, Type)>,
    ok: Type,
    err: Type,
}

fn result_types(ret: &syn::ReturnType) -> syn::Result<(Type, Type)> {
    let syn::ReturnType::Type(_, ty) = ret else {
        return Err(Error::new(
            ret.span(),
            "a remotable method returns Result<T, E>",
        ));
    };
    let Type::Path(p) = ty.as_ref() else {
        return Err(Error::new(
            ty.span(),
            "a remotable method returns Result<T, E>",
        ));
    };
    let seg = p
        .path
        .segments
        .last()
        .ok_or_else(|| Error::new(ty.span(), "expected Result<T, E>"))?;
    let PathArguments::AngleBracketed(args) = &seg.arguments else {
        return Err(Error::new(
            ty.span(),
            "a remotable method returns Result<T, E>",
        ));
    };
    let types: Vec<&Type> = args
        .args
        .iter()
        .filter_map(|a| match a {
            GenericArgument::Type(t) => Some(t),
            _ => None,
        })
        .collect();
    match types.as_slice() {
        [ok, err] => Ok(((*ok).clone(), (*err).clone())),
        _ => Err(Error::new(
            ty.span(),
            "write the error type out: Result<T, CallError>",
        )),
    }
}

fn expand_remotable(mut block: syn::ItemImpl) -> syn::Result<TokenStream2> {
    let self_ty = block.self_ty.clone();
    let mut methods = Vec::new();
    let mut extra_items: Vec<syn::ImplItem> = Vec::new();
    for item in &mut block.items {
        let syn::ImplItem::Fn(f) = item else { continue };
        let Some(pos) = f.attrs.iter().position(|a| a.path().is_ident("remotable")) else {
            continue;
        };
        f.attrs.remove(pos);
        if f.sig.asyncness.is_none() {
            return Err(Error::new(f.sig.span(), "a remotable method is async"));
        }
        let (ok, err) = result_types(&f.sig.output)?;
        let mut inputs = f.sig.inputs.iter();
        let (instance, ctx) = match inputs.next() {
            Some(syn::FnArg::Receiver(r)) => {
                if r.reference.is_none() || r.mutability.is_none() {
                    return Err(Error::new(
                        r.span(),
                        "an instance remotable method takes &mut self",
                    ));
                }
                (true, None)
            }
            Some(syn::FnArg::Typed(t)) => (false, Some((*t.pat).clone())),
            None => {
                return Err(Error::new(
                    f.sig.span(),
                    "a class remotable method takes the context first",
                ))
            }
        };
        let mut args = Vec::new();
        for input in inputs {
            let syn::FnArg::Typed(t) = input else {
                return Err(Error::new(input.span(), "unexpected receiver"));
            };
            let syn::Pat::Ident(pi) = t.pat.as_ref() else {
                return Err(Error::new(
                    t.pat.span(),
                    "remotable arguments are plain names",
                ));
            };
            args.push((pi.ident.clone(), (*t.ty).clone()));
        }
        let name = f.sig.ident.clone();
        let local = format_ident_local(&name);
        // The body moves to a hidden local function; the visible name becomes the wrapper.
        let mut local_fn = f.clone();
        local_fn.sig.ident = local.clone();
        local_fn.vis = syn::Visibility::Inherited;
        local_fn.attrs.retain(|a| !a.path().is_ident("doc"));
        local_fn.attrs.push(syn::parse_quote!(#[doc(hidden)]));
        extra_items.push(syn::ImplItem::Fn(local_fn));

        let m = RemoteMethod {
            name: name.clone(),
            instance,
            ctx,
            args,
            ok,
            err,
        };
        f.block = wrapper_body(&m, &local)?;
        methods.push(m);
    }
    block.items.extend(extra_items);

    let schemas = methods.iter().map(|m| {
        let name = m.name.to_string();
        let kind = if m.instance { quote!(::verso::MethodKind::Instance) } else { quote!(::verso::MethodKind::Class) };
        let args = m.args.iter().map(|(n, t)| {
            let n = n.to_string();
            let t = quote!(#t).to_string();
            quote!(::verso::ArgSchema { name: #n, ty: #t })
        });
        let ok = &m.ok;
        let returns = quote!(#ok).to_string();
        quote!(::verso::MethodSchema { name: #name, kind: #kind, args: ::std::vec![#(#args),*], returns: #returns })
    });
    let self_ty_ref = &self_ty;
    let arms = |instance: bool| {
        methods.iter().filter(move |m| m.instance == instance).map(move |m| {
            let name = m.name.to_string();
            let local = format_ident_local(&m.name);
            let takes = m.args.iter().enumerate().map(|(i, (n, t))| {
                let ns = n.to_string();
                quote!(let #n: #t = args.take(#i, #ns)?;)
            });
            let names = m.args.iter().map(|(n, _)| n);
            let err = &m.err;
            let call = if instance {
                quote!(self.#local(#(#names),*).await)
            } else {
                quote!(<#self_ty_ref>::#local(ctx, #(#names),*).await)
            };
            quote! {
                #name => {
                    #(#takes)*
                    args.finish()?;
                    let out = #call.map_err(|e: #err| ::verso::CallError::from(e))?;
                    ::core::result::Result::Ok(::verso::indirection::RemoteValue::into_output(out))
                }
            }
        })
    };
    let class_arms = arms(false);
    let instance_arms = arms(true);
    Ok(quote! {
        #block

        impl ::verso::indirection::Remotable for #self_ty {
            fn remotable_methods() -> ::std::vec::Vec<::verso::MethodSchema> {
                ::std::vec![#(#schemas),*]
            }
            #[allow(unused_mut, unused_variables)]
            fn dispatch_class<'a>(
                ctx: &'a ::verso::RequestContext,
                method: &'a str,
                mut args: ::verso::indirection::CallArgs,
            ) -> ::verso::indirection::BoxFuture<'a, ::core::result::Result<::verso::indirection::MethodOutput, ::verso::CallError>> {
                ::std::boxed::Box::pin(async move {
                    match method {
                        #(#class_arms)*
                        other => ::core::result::Result::Err(::verso::CallError::UnknownMethod {
                            object: <Self as ::verso::VersionedObject>::NAME.into(),
                            method: other.into(),
                        }),
                    }
                })
            }
            #[allow(unused_mut, unused_variables)]
            fn dispatch_instance<'a>(
                &'a mut self,
                method: &'a str,
                mut args: ::verso::indirection::CallArgs,
            ) -> ::verso::indirection::BoxFuture<'a, ::core::result::Result<::verso::indirection::MethodOutput, ::verso::CallError>> {
                ::std::boxed::Box::pin(async move {
                    match method {
                        #(#instance_arms)*
                        other => ::core::result::Result::Err(::verso::CallError::UnknownMethod {
                            object: <Self as ::verso::VersionedObject>::NAME.into(),
                            method: other.into(),
                        }),
                    }
                })
            }
        }
    })
}

fn format_ident_local(name: &Ident) -> Ident {
    Ident::new(&format!("__verso_local_{}", name.unraw()), name.span())
}

fn wrapper_body(m: &RemoteMethod, local: &Ident) -> syn::Result<syn::Block> {
    let name = m.name.to_string();
    let names: Vec<&Ident> = m.args.iter().map(|(n, _)| n).collect();
    let ok = &m.ok;
    let err = &m.err;
    let body = if m.instance {
        quote!({
            let ctx = match ::verso::VersionedObject::context(self) {
                ::core::option::Option::Some(c) => c.clone(),
                ::core::option::Option::None => {
                    return ::core::result::Result::Err(<#err as ::core::convert::From<::verso::CallError>>::from(::verso::CallError::Orphaned {
                        object: <Self as ::verso::VersionedObject>::NAME,
                        method: #name.into(),
                    }))
                }
            };
            if let ::core::option::Option::Some(api) = ctx.indirection(<Self as ::verso::VersionedObject>::NAMESPACE) {
                let api = api.clone();
                let args = ::std::vec![#(::verso::indirection::RemoteValue::to_remote(&#names)),*];
                let objinst = ::verso::__private::encode_own(self);
                let (mut updates, mut result) = api
                    .object_action(&ctx, objinst, #name, args, ::verso::__private::Map::new())
                    .await
                    .map_err(<#err as ::core::convert::From<::verso::CallError>>::from)?;
                // A newer conductor's objects (a changed field's value, the result) at a
                // version this build does not know: backported through the conductor
                // first, as OVO's serializer does with the reply.
                static MANIFESTS: ::std::sync::OnceLock<(::verso::VersionManifest, ::core::option::Option<::verso::VersionManifest>)> = ::std::sync::OnceLock::new();
                let (own, returned) = MANIFESTS.get_or_init(|| {
                    (<Self as ::verso::VersionedObject>::manifest(), <#ok as ::verso::indirection::RemoteValue>::manifest())
                });
                ::verso::__private::backport_updates(&ctx, &mut updates, own)
                    .await
                    .map_err(<#err as ::core::convert::From<::verso::CallError>>::from)?;
                ::verso::__private::apply_updates(self, &updates)
                    .map_err(|e| <#err as ::core::convert::From<::verso::CallError>>::from(e.into()))?;
                if let ::core::option::Option::Some(returned) = returned {
                    ::verso::__private::backport_result(&ctx, &mut result, returned)
                        .await
                        .map_err(<#err as ::core::convert::From<::verso::CallError>>::from)?;
                }
                return ::verso::__private::decode_result::<#ok>(&result, &ctx).map_err(<#err as ::core::convert::From<::verso::CallError>>::from);
            }
            self.#local(#(#names),*).await
        })
    } else {
        let ctx = m
            .ctx
            .as_ref()
            .ok_or_else(|| Error::new(m.name.span(), "missing context argument"))?;
        quote!({
            if let ::core::option::Option::Some(api) = #ctx.indirection(<Self as ::verso::VersionedObject>::NAMESPACE) {
                static MANIFEST: ::std::sync::OnceLock<::verso::VersionManifest> = ::std::sync::OnceLock::new();
                let manifest = MANIFEST.get_or_init(<Self as ::verso::VersionedObject>::manifest);
                let args = ::std::vec![#(::verso::indirection::RemoteValue::to_remote(&#names)),*];
                let result = api
                    .object_class_action_versions(#ctx, <Self as ::verso::VersionedObject>::NAME, #name, manifest, args, ::verso::__private::Map::new())
                    .await
                    .map_err(<#err as ::core::convert::From<::verso::CallError>>::from)?;
                return ::verso::__private::decode_result::<#ok>(&result, #ctx).map_err(<#err as ::core::convert::From<::verso::CallError>>::from);
            }
            Self::#local(#ctx, #(#names),*).await
        })
    };
    syn::parse2(body)
}
