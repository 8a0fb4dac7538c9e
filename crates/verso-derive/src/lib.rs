//! Derive macros for verso: `#[derive(VersionedObject)]` and `#[derive(VersionedEnum)]`.
//!
//! The macros only describe the type (schema, field access); every behaviour lives in the
//! `verso` crate, as serde's derive leaves the work to serde.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::quote;
use syn::{
    ext::IdentExt, parse_macro_input, spanned::Spanned, Data, DeriveInput, Error, Expr, Fields,
    GenericArgument, Ident, LitStr, PathArguments, Type,
};

/// Derives `verso::VersionedObject` for a struct of `Field<T>` fields and one
/// `ObjectMeta` field.
///
/// Struct attributes (`#[verso(...)]`): `namespace = "..."` (required), `version = "X.Y"`
/// (required), `name = "..."` (default: the struct name), `list` (a list object: one
/// field `objects: Field<Vec<Member>>`), `child_versions = [("1.0", "1.0"), ...]` (lists),
/// `make_compatible = path::to::fn` (custom backport hook), `remotable` (the type has a
/// `#[verso::remotable]` impl block), `test_only` (kept out of fingerprint lock files).
///
/// Field attributes: `since = "X.Y"` (the version that added the field), `default = expr`
/// (a value convertible into the field type), `rename = "..."` (the wire name, when it
/// is not the Rust name; `r#type` is `type` without it),
/// `relationships = [("1.1", "1.1"), ...]`
/// (for object fields: which child version goes with which parent version).
#[proc_macro_derive(VersionedObject, attributes(verso))]
pub fn derive_versioned_object(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand_object(&input)
        .unwrap_or_else(Error::into_compile_error)
        .into()
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
                return Err(meta.error("unknown verso attribute; expected namespace, name, version, list, child_versions, make_compatible, remotable or test_only"));
            }
            Ok(())
        })?;
    }
    let namespace = attrs
        .namespace
        .ok_or_else(|| Error::new(Span::call_site(), "missing #[verso(namespace = \"...\")]"))?;
    let version_lit = attrs
        .version
        .ok_or_else(|| Error::new(Span::call_site(), "missing #[verso(version = \"X.Y\")]"))?;
    let version = parse_version(&version_lit)?;
    let name = attrs
        .name
        .unwrap_or_else(|| LitStr::new(&ident.to_string(), ident.span()));

    let Data::Struct(data) = &input.data else {
        return Err(Error::new(
            input.span(),
            "VersionedObject can only be derived for structs",
        ));
    };
    let Fields::Named(named) = &data.fields else {
        return Err(Error::new(
            input.span(),
            "VersionedObject needs named fields",
        ));
    };
    let mut meta_field = None;
    let mut fields = Vec::new();
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
                } else {
                    return Err(meta.error("unknown verso field attribute; expected since, default, rename or relationships"));
                }
                Ok(())
            })?;
        }
        fields.push(info);
    }
    let meta_field = meta_field.ok_or_else(|| {
        Error::new(
            input.span(),
            "a versioned object needs one field of type verso::ObjectMeta",
        )
    })?;

    let field_schemas = fields.iter().map(|f| {
        let fname = &f.wire_name;
        let ty = &f.inner;
        let since = f.since.as_ref().map_or(quote!(::core::option::Option::None), |v| quote!(::core::option::Option::Some(#v)));
        let default = f.default.as_ref().map_or(quote!(::core::option::Option::None), |e| {
            quote!(::core::option::Option::Some(::verso::field::default_primitive::<#ty>(::core::convert::Into::<#ty>::into(#e))))
        });
        let rel = f.relationships.clone().unwrap_or_else(|| quote!(::std::vec::Vec::new()));
        quote! {
            ::verso::FieldSchema {
                name: #fname,
                ty: <#ty as ::verso::FieldValue>::field_type(),
                nullable: <#ty as ::verso::FieldValue>::nullable(),
                default: #default,
                since: #since,
                relationships: #rel,
                child: <#ty as ::verso::FieldValue>::child_schema(),
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
        quote!(<#ident>::__verso_remotable_methods())
    } else {
        quote!(::std::vec::Vec::new())
    };

    let idents: Vec<&Ident> = fields.iter().map(|f| &f.ident).collect();
    let indices: Vec<usize> = (0..fields.len()).collect();
    let blank_fields = fields.iter().map(|f| {
        let id = &f.ident;
        if is_list && id == "objects" {
            // OVO's ObjectListBase starts with an empty, unchanged member list.
            quote!(#id: { let mut f = ::verso::Field::new(::std::vec::Vec::new()); f.set_changed(false); f })
        } else {
            quote!(#id: ::verso::Field::unset())
        }
    });
    let make_compatible = attrs.make_compatible.map(|path| {
        quote! {
            fn make_compatible(
                &self,
                data: &mut ::verso::PrimitiveData,
                target: &::verso::Version,
                manifest: ::core::option::Option<&::verso::VersionManifest>,
            ) -> ::verso::Result<()> {
                #path(self, data, target, manifest)
            }
        }
    });

    let list_impls = if is_list {
        let objects = fields
            .iter()
            .find(|f| f.ident == "objects")
            .ok_or_else(|| {
                Error::new(
                    input.span(),
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

            fn schema() -> &'static ::verso::ObjectSchema {
                static SCHEMA: ::std::sync::OnceLock<::verso::ObjectSchema> = ::std::sync::OnceLock::new();
                SCHEMA.get_or_init(|| {
                    let mut methods: ::std::vec::Vec<::verso::MethodSchema> = #methods;
                    methods.sort_by(|a, b| a.name.cmp(b.name));
                    ::verso::ObjectSchema {
                        name: #name,
                        namespace: #namespace,
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
            #make_compatible
        }

        impl ::verso::FieldValue for #ident {
            fn field_type() -> ::verso::FieldType {
                ::verso::FieldType::Object(#name)
            }
            fn child_schema() -> ::core::option::Option<fn() -> &'static ::verso::ObjectSchema> {
                ::core::option::Option::Some(<Self as ::verso::VersionedObject>::schema)
            }
            fn to_primitive(&self) -> ::verso::__private::Value {
                ::verso::VersionedObject::to_primitive(self)
            }
            fn from_primitive(value: &::verso::__private::Value) -> ::verso::Result<Self> {
                <Self as ::verso::VersionedObject>::from_primitive(value)
            }
            fn describe(&self) -> ::verso::__private::Value {
                ::verso::VersionedObject::describe(self)
            }
            fn has_changes(&self) -> bool {
                !::verso::VersionedObject::what_changed(self).is_empty()
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
                ::verso::manifest::backport_object(self, primitive, to, manifest)
            }
        }

        #list_impls
    })
}

fn expand_enum(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let ident = &input.ident;
    let Data::Enum(data) = &input.data else {
        return Err(Error::new(
            input.span(),
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
            fn to_primitive(&self) -> ::verso::__private::Value {
                ::verso::__private::Value::String(::verso::VersionedEnum::as_str(self).into())
            }
            fn from_primitive(value: &::verso::__private::Value) -> ::verso::Result<Self> {
                ::verso::field::enum_from_primitive(value)
            }
        }
        impl ::core::fmt::Display for #ident {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(::verso::VersionedEnum::as_str(self))
            }
        }
    })
}
